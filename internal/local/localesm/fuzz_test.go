package localesm

// A fuzz target of the conversion of received SQS messages, whatever a
// producer put in them, into the Lambda event the local mapping delivers.
// Plain `go test` runs the seeds and testdata/fuzz; `make fuzz` searches
// further.

import (
	"bytes"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// FuzzNewEvent builds an event of two messages (the second without
// attributes or values) and checks it never fails, holds every message in
// order, in Lambda's shape (lists [] not null), and carries every string
// SQS could have delivered (valid UTF-8: SQS accepts no other) and every
// binary value exactly.
func FuzzNewEvent(f *testing.F) {
	f.Add("m-1", `{"orderId":"A"}`, "tenant", "String", "t-1", []byte(nil), "MessageGroupId", "g1", "arn:aws:sqs:us-east-1:000000000000:q")
	f.Add("m-1", "body", "blob", "Binary", "", []byte{0, 0xff, 0xfe}, "SentTimestamp", "1700000000000", "arn:aws:sqs:us-east-1:000000000000:q.fifo")
	f.Add("m-1", "\u2028<&>\U0001F600", "n", "Number.float", "1.5e3", []byte{}, "", "", "")
	f.Add("m\xff", "b\xfe", "a\xff", "String", "v\xff", []byte(nil), "k\xff", "v\xff", "arn")
	f.Fuzz(func(t *testing.T, id, body, attrName, dataType, value string, bin []byte, sysName, sysValue, arn string) {
		attr := sqstypes.MessageAttributeValue{DataType: aws.String(dataType), BinaryValue: bin}
		if value != "" {
			attr.StringValue = aws.String(value)
		}
		msgs := []sqstypes.Message{
			{
				MessageId:         aws.String(id),
				ReceiptHandle:     aws.String("rh-" + id),
				Body:              aws.String(body),
				Attributes:        map[string]string{sysName: sysValue},
				MessageAttributes: map[string]sqstypes.MessageAttributeValue{attrName: attr},
			},
			{MessageId: aws.String("second")},
		}
		ev, err := NewEvent(msgs, arn, "us-east-1")
		if err != nil {
			t.Fatalf("NewEvent: %v", err)
		}
		if len(ev.Records) != 2 || ev.Records[1].MessageId != "second" {
			t.Fatalf("records %+v", ev.Records)
		}
		for _, r := range ev.Records {
			if r.EventSource != EventSource || r.AWSRegion != "us-east-1" || r.Attributes == nil || r.MessageAttributes == nil {
				t.Fatalf("record not in Lambda's shape: %+v", r)
			}
			for name, a := range r.MessageAttributes {
				if a.StringListValues == nil || a.BinaryListValues == nil {
					t.Fatalf("attribute %q: list values null, Lambda sends []", name)
				}
			}
		}
		r := ev.Records[0]
		valid := func(s string) bool { return utf8.ValidString(s) }
		if valid(id) && r.MessageId != id || valid(body) && r.Body != body || valid(arn) && r.EventSourceARN != arn {
			t.Fatalf("message id, body or ARN changed: %q, %q, %q", r.MessageId, r.Body, r.EventSourceARN)
		}
		if valid(sysName) && valid(sysValue) && r.Attributes[sysName] != sysValue {
			t.Fatalf("system attribute %q = %q, want %q", sysName, r.Attributes[sysName], sysValue)
		}
		if !valid(attrName) || !valid(dataType) || !valid(value) {
			return
		}
		a, ok := r.MessageAttributes[attrName]
		if !ok || a.DataType != dataType || (a.StringValue == nil) != (value == "") || (value != "" && *a.StringValue != value) {
			t.Fatalf("attribute %q = %+v, want type %q, value %q", attrName, a, dataType, value)
		}
		// An empty binary value is absent in Lambda's JSON, as in SQS's.
		if !bytes.Equal(a.BinaryValue, bin) {
			t.Fatalf("binary value %v, want %v", a.BinaryValue, bin)
		}
	})
}
