package sqsmsg

// Fuzz targets of the conversion of Lambda SQS records, outside input, into
// messages to send on. Plain `go test` runs the seeds and testdata/fuzz;
// `make fuzz` searches further.

import (
	"bytes"
	"context"
	"encoding/base64"
	"maps"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// fuzzRecord builds a record from fuzz input: names, types and values
// are NUL-separated lists (up to 12 attributes); bit i of withString gives
// attribute i a StringValue, bit i+16 its binary value bin (empty and nil
// kept apart); the body is body followed by pad 'x's, so the limits are in
// reach.
func fuzzRecord(names, types, values string, bin []byte, withString uint32, body string, pad uint32, group string) events.SQSMessage {
	rec := events.SQSMessage{
		MessageId:         "m-1",
		Body:              body + strings.Repeat("x", int(pad%(MaxMessageBytes+64))),
		Attributes:        map[string]string{},
		MessageAttributes: map[string]events.SQSMessageAttribute{},
	}
	if group != "" {
		rec.Attributes["MessageGroupId"] = group
	}
	ts, vs := strings.Split(types, "\x00"), strings.Split(values, "\x00")
	for i, name := range strings.Split(names, "\x00") {
		if i == 12 || name == "" {
			break
		}
		a := events.SQSMessageAttribute{DataType: ts[min(i, len(ts)-1)]}
		if withString&(1<<i) != 0 {
			v := vs[min(i, len(vs)-1)]
			a.StringValue = &v
		}
		if withString&(1<<(i+16)) != 0 {
			a.BinaryValue = bytes.Clone(bin)
			if a.BinaryValue == nil {
				a.BinaryValue = []byte{}
			}
		}
		rec.MessageAttributes[name] = a
	}
	return rec
}

// FuzzRecordAttributes converts a record's attributes and checks that the
// conversion is lossless (types, string and binary values, nil kept apart
// from empty, no sharing with the record), that AttributeText and
// OriginalMessageID read what the record holds, that Size counts what a
// SendMessageBatch call carries for the entry, that SetAttribute keeps an
// entry within SQS's limits or leaves it unchanged, and that a forward
// keeps every attribute it does not own.
func FuzzRecordAttributes(f *testing.F) {
	f.Add("a\x00b", "String\x00Binary", "v\x00", []byte{0, 0xff}, uint32(1|2<<16), `{"orderId":"A"}`, uint32(0), "", "sqs-once-reason", "String", "x")
	f.Add("sqs-dlq-original-message-id", "Binary.uuid", "", []byte{1, 2}, uint32(1<<16), "b", uint32(0), "g1", "sqs-dlq-replay-nb", "Number", "3")
	f.Add("sqs-dlq-original-message-id", "String", "orig-1", []byte(nil), uint32(1), "b", uint32(0), "", "new", "String", "v")
	f.Add("n", "Number.float", "1.5e3", []byte(nil), uint32(1), "", uint32(MaxMessageBytes-20), "", "sqs-once-reason", "String", "max-attempts")
	f.Add("a\x00b\x00c\x00d\x00e\x00f\x00g\x00h\x00i\x00j", "String", "v", []byte(nil), uint32(0x3ff), "b", uint32(0), "", "k", "String", "v")
	f.Add("empty", "Binary", "", []byte(nil), uint32(1<<16), "b", uint32(0), "", "e", "Binary", "")
	f.Add("both", "String", "s", []byte{9}, uint32(1|1<<16), "b", uint32(MaxMessageBytes), "", "x", "String", "y")
	f.Fuzz(func(t *testing.T, names, types, values string, bin []byte, withString uint32, body string, pad uint32, group, setName, setType, setValue string) {
		rec := fuzzRecord(names, types, values, bin, withString, body, pad, group)
		orig := cloneRecordAttrs(rec.MessageAttributes)

		out := Attributes(rec.MessageAttributes)
		if len(out) != len(rec.MessageAttributes) {
			t.Fatalf("%d attributes converted of %d", len(out), len(rec.MessageAttributes))
		}
		for name, a := range rec.MessageAttributes {
			v := out[name]
			if aws.ToString(v.DataType) != a.DataType || (v.StringValue == nil) != (a.StringValue == nil) ||
				(a.StringValue != nil && *v.StringValue != *a.StringValue) ||
				(v.BinaryValue == nil) != (a.BinaryValue == nil) || !bytes.Equal(v.BinaryValue, a.BinaryValue) {
				t.Fatalf("attribute %q: %+v converted to %+v", name, a, v)
			}
			if len(v.BinaryValue) > 0 {
				v.BinaryValue[0]++ // the record's copy must not change
			}
			text := AttributeText(a)
			switch {
			case a.StringValue != nil:
				if text != *a.StringValue {
					t.Fatalf("AttributeText(%+v) = %q", a, text)
				}
			case len(a.BinaryValue) > 0:
				if b, err := base64.StdEncoding.DecodeString(text); err != nil || !bytes.Equal(b, a.BinaryValue) {
					t.Fatalf("AttributeText(%+v) = %q, not the value in base64", a, text)
				}
			case text != "":
				t.Fatalf("AttributeText of a value-less attribute = %q", text)
			}
		}
		if !reflect.DeepEqual(rec.MessageAttributes, orig) {
			t.Fatal("converting the attributes changed the record's")
		}
		if id, ok := OriginalMessageID(rec); ok != (AttributeText(rec.MessageAttributes[AttrOriginalMessageID]) != "") ||
			id != AttributeText(rec.MessageAttributes[AttrOriginalMessageID]) {
			t.Fatalf("OriginalMessageID = %q, %t", id, ok)
		}

		e := FromRecord(rec)
		if e.Body != rec.Body || e.RecordID != rec.MessageId || e.GroupID != rec.Attributes["MessageGroupId"] {
			t.Fatalf("FromRecord = %+v", e)
		}
		want := len(rec.Body)
		for name, a := range rec.MessageAttributes {
			want += len(name) + len(a.DataType) + len(AttrString(a)) + len(a.BinaryValue)
		}
		if e.Size() != want {
			t.Fatalf("Size() = %d, the record's body and attributes are %d bytes", e.Size(), want)
		}
		checkSent(t, e)

		// SetAttribute: within the limits, or no change.
		before := e
		before.Attributes = maps.Clone(e.Attributes)
		v := sqstypes.MessageAttributeValue{DataType: aws.String(setType), StringValue: aws.String(setValue)}
		old, had := e.Attributes[setName]
		if e.SetAttribute(setName, v) {
			if !reflect.DeepEqual(e.Attributes[setName], v) || len(e.Attributes) > MaxAttributes || e.Size() > MaxMessageBytes {
				t.Fatalf("SetAttribute(%q) made %d attributes, %d bytes", setName, len(e.Attributes), e.Size())
			}
			delta := len(setName) + len(setType) + len(setValue)
			if had {
				delta -= len(setName) + len(aws.ToString(old.DataType)) + len(aws.ToString(old.StringValue)) + len(old.BinaryValue)
			}
			if e.Size() != before.Size()+delta {
				t.Fatalf("Size() = %d after SetAttribute, want %d", e.Size(), before.Size()+delta)
			}
			checkSent(t, e)
		} else {
			if !reflect.DeepEqual(e, before) {
				t.Fatalf("a refused SetAttribute changed the entry: %+v", e)
			}
			roomy := (had || len(before.Attributes) < MaxAttributes) &&
				before.Size()+len(setName)+len(setType)+len(setValue)-sizeOf(setName, old, had) <= MaxMessageBytes
			if roomy {
				t.Fatalf("SetAttribute(%q) refused on an entry with room (%d attributes, %d bytes)", setName, len(before.Attributes), before.Size())
			}
		}

		// A forward keeps the record's attributes but the reason; the
		// original id too, when it has one.
		for _, queue := range []string{"https://sqs.us-east-1.amazonaws.com/1/op", "https://sqs.us-east-1.amazonaws.com/1/op.fifo"} {
			fw := ForwardEntry(rec, queue, "max-attempts")
			for name, a := range Attributes(rec.MessageAttributes) {
				if name == AttrReason || (name == AttrOriginalMessageID && !hasOriginal(rec)) {
					continue
				}
				if !reflect.DeepEqual(fw.Attributes[name], a) {
					t.Fatalf("forward changed attribute %q: %+v to %+v", name, a, fw.Attributes[name])
				}
			}
			if fw.Size() > max(MaxMessageBytes, want) || len(fw.Attributes) > max(MaxAttributes, len(rec.MessageAttributes)) {
				t.Fatalf("forward grew the message past the limits: %d attributes, %d bytes", len(fw.Attributes), fw.Size())
			}
			if IsFIFO(queue) && (fw.GroupID == "" || len(fw.DeduplicationID) != 64) {
				t.Fatalf("FIFO forward without group or deduplication id: %+v", fw)
			}
		}
	})
}

// AttrString is a record attribute's StringValue, "" for none.
func AttrString(a events.SQSMessageAttribute) string {
	if a.StringValue == nil {
		return ""
	}
	return *a.StringValue
}

func sizeOf(name string, v sqstypes.MessageAttributeValue, present bool) int {
	if !present {
		return 0
	}
	return len(name) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
}

func hasOriginal(rec events.SQSMessage) bool {
	_, ok := OriginalMessageID(rec)
	return ok
}

func cloneRecordAttrs(in map[string]events.SQSMessageAttribute) map[string]events.SQSMessageAttribute {
	out := map[string]events.SQSMessageAttribute{}
	for k, a := range in {
		if a.StringValue != nil {
			s := *a.StringValue
			a.StringValue = &s
		}
		a.BinaryValue = bytes.Clone(a.BinaryValue)
		out[k] = a
	}
	return out
}

// checkSent sends e with SendBatch: one over MaxMessageBytes is refused
// unsent, any other goes in one call whose entry carries exactly e's body
// and attributes, Size() bytes as SQS counts them.
func checkSent(t *testing.T, e Entry) {
	t.Helper()
	api := &fakeSender{}
	failed := SendBatch(context.Background(), api, "https://sqs.us-east-1.amazonaws.com/1/main", []Entry{e})
	if e.Size() > MaxMessageBytes {
		if len(api.calls) != 0 || failed[e.RecordID] == nil {
			t.Fatalf("an entry of %d bytes was sent", e.Size())
		}
		return
	}
	if len(failed) != 0 || len(api.calls) != 1 || len(api.calls[0].Entries) != 1 {
		t.Fatalf("an entry of %d bytes: %d calls, failed %v", e.Size(), len(api.calls), failed)
	}
	sent := api.calls[0].Entries[0]
	n := len(aws.ToString(sent.MessageBody))
	for name, v := range sent.MessageAttributes {
		n += sizeOf(name, v, true)
	}
	if aws.ToString(sent.MessageBody) != e.Body || !reflect.DeepEqual(sent.MessageAttributes, e.Attributes) || n != e.Size() {
		t.Fatalf("sent %d bytes, Size() = %d", n, e.Size())
	}
}

// FuzzSameQueue compares a queue URL with an event's source ARN, both
// outside input: never a panic, and a match only when the ARN's account
// and name are the URL's path.
func FuzzSameQueue(f *testing.F) {
	f.Add("https://sqs.us-east-1.amazonaws.com/123456789012/orders", "arn:aws:sqs:us-east-1:123456789012:orders")
	f.Add("https://sqs.eu-west-1.amazonaws.com/123456789012/orders", "arn:aws:sqs:us-east-1:123456789012:orders")
	f.Add("https://us-east-1.queue.amazonaws.com/123456789012/orders", "arn:aws:sqs:us-east-1:123456789012:orders")
	f.Add("http://localhost:4566/000000000000/q.fifo", "arn:aws:sqs:us-east-1:000000000000:q.fifo")
	f.Add("https://sqs.us-east-1.amazonaws.com/123456789012/orders/", "arn:aws:sqs:us-east-1:123456789012:orders")
	f.Add("%zz", "arn:aws:sqs:us-east-1:1:q")
	f.Add("https://sqs.x.amazonaws.com//", "arn:aws:sqs:x:::")
	f.Fuzz(func(t *testing.T, queueURL, arn string) {
		if !SameQueue(queueURL, arn) {
			return
		}
		parts := strings.Split(arn, ":")
		u, err := url.Parse(queueURL)
		if len(parts) != 6 || err != nil || parts[4] == "" || parts[5] == "" || strings.Trim(u.Path, "/") != parts[4]+"/"+parts[5] {
			t.Fatalf("SameQueue(%q, %q) = true", queueURL, arn)
		}
	})
}
