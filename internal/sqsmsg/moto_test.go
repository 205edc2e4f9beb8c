//go:build integration

package sqsmsg

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqs-once/sqs-once/internal/local/mototest"
)

func TestMain(m *testing.M) { mototest.Main(m) }

// countingSender counts the calls that reach the real client.
type countingSender struct {
	*sqs.Client
	calls atomic.Int32
}

func (c *countingSender) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	c.calls.Add(1)
	return c.Client.SendMessageBatch(ctx, in, optFns...)
}

func gzipped(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write([]byte(s)); err != nil || w.Close() != nil {
		t.Fatal("gzip failed")
	}
	return b.Bytes()
}

// Every data type, custom suffixes and arbitrary bytes survive the
// event-attribute conversion and a real send and receive unchanged.
func TestAttributesRoundTripThroughSQS(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	url := mototest.NewQueue(t, cfg, false, nil)
	str := func(s string) *string { return &s }
	in := map[string]events.SQSMessageAttribute{
		"s":        {DataType: "String", StringValue: str("héllo ✓ \"quoted\" <xml/>")},
		"n":        {DataType: "Number", StringValue: str("-1.50e3")},
		"nf":       {DataType: "Number.float", StringValue: str("3.140")},
		"sc":       {DataType: "String.custom-label_1", StringValue: str("x")},
		"b":        {DataType: "Binary", BinaryValue: []byte{0, 1, 0x7f, 0x80, 0xfe, 0xff, '\n', 0}},
		"bg":       {DataType: "Binary.gzip", BinaryValue: gzipped(t, "payload")},
		"lists":    {DataType: "String", StringValue: str("list fields dropped"), StringListValues: []string{}, BinaryListValues: [][]byte{}},
		"1-2_3.x":  {DataType: "Number.int", StringValue: str("0")},
		"spaces":   {DataType: "String", StringValue: str("  leading and trailing  ")},
		"bin-utf8": {DataType: "Binary.utf8", BinaryValue: []byte("ü")},
	}
	api := &countingSender{Client: sqs.NewFromConfig(cfg)}
	e := Entry{RecordID: "r", Body: "body ✓", Attributes: Attributes(in)}
	if failed := SendBatch(context.Background(), api, url, []Entry{e}); len(failed) != 0 {
		t.Fatalf("send: %v", failed)
	}
	got := mototest.Receive(t, cfg, url, 1, 10*time.Second)
	if len(got) != 1 {
		t.Fatalf("received %d messages, want 1", len(got))
	}
	if aws.ToString(got[0].Body) != e.Body || len(got[0].MessageAttributes) != len(in) {
		t.Fatalf("body %q with %d attributes, want %q with %d", aws.ToString(got[0].Body), len(got[0].MessageAttributes), e.Body, len(in))
	}
	for name, want := range in {
		a := got[0].MessageAttributes[name]
		if aws.ToString(a.DataType) != want.DataType || aws.ToString(a.StringValue) != aws.ToString(want.StringValue) ||
			!bytes.Equal(a.BinaryValue, want.BinaryValue) || (a.StringValue == nil) != (want.StringValue == nil) {
			t.Errorf("attribute %s: got %s %q %x, want %s %q %x", name, aws.ToString(a.DataType), aws.ToString(a.StringValue), a.BinaryValue,
				want.DataType, aws.ToString(want.StringValue), want.BinaryValue)
		}
	}
}

// Chunking by bytes is what SQS (here moto, which enforces the 1 MiB batch
// total) accepts: three 400 KiB messages take two calls and all arrive.
func TestSendBatchByBytesAgainstSQS(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	url := mototest.NewQueue(t, cfg, false, nil)
	api := &countingSender{Client: sqs.NewFromConfig(cfg)}
	es := entries(3, 400<<10)
	if failed := SendBatch(context.Background(), api, url, es); len(failed) != 0 {
		t.Fatalf("send: %v", failed)
	}
	if n := api.calls.Load(); n != 2 {
		t.Errorf("%d SendMessageBatch calls, want 2", n)
	}
	got := mototest.Receive(t, cfg, url, 3, 10*time.Second)
	if len(got) != 3 {
		t.Fatalf("received %d messages, want 3", len(got))
	}
	for _, m := range got {
		if len(aws.ToString(m.Body)) != 400<<10 || !strings.HasPrefix(aws.ToString(m.Body), "b") {
			t.Errorf("message body changed (%d bytes)", len(aws.ToString(m.Body)))
		}
	}
}

// A whole-call failure from SQS itself (a queue that does not exist) maps to
// every record of the call.
func TestSendBatchWholeCallFailureFromSQS(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	url := mototest.NewQueue(t, cfg, false, nil) + "-missing"
	es := entries(3, 10)
	failed := SendBatch(context.Background(), sqs.NewFromConfig(cfg), url, es)
	for _, e := range es {
		if failed[e.RecordID] == nil {
			t.Errorf("record %q not reported as failed", e.RecordID)
		}
	}
}

// The MessageIds SendBatchAccepted returns are the ones SQS delivers the
// messages with.
func TestSendBatchAcceptedMessageIDsFromSQS(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	url := mototest.NewQueue(t, cfg, false, nil)
	es := entries(13, 10)
	accepted, failed := SendBatchAccepted(context.Background(), sqs.NewFromConfig(cfg), url, es)
	if len(failed) != 0 || len(accepted) != len(es) {
		t.Fatalf("accepted %d, failed %v", len(accepted), failed)
	}
	want := map[string]string{} // MessageId -> body
	for _, e := range es {
		want[accepted[e.RecordID]] = e.Body
	}
	got := mototest.Receive(t, cfg, url, len(es), 10*time.Second)
	if len(got) != len(es) {
		t.Fatalf("received %d messages, want %d", len(got), len(es))
	}
	for _, m := range got {
		if body, ok := want[aws.ToString(m.MessageId)]; !ok || body != aws.ToString(m.Body) {
			t.Errorf("message %s (%q) was not returned by SendBatchAccepted with that body", aws.ToString(m.MessageId), aws.ToString(m.Body))
		}
	}
}

// A forward to the operator queue (the replayer's hopeless dead letters, the
// processor's Permanent failures) keeps an existing original id of any data
// type byte for byte, and adds a String one only where there is none.
func TestForwardKeepsOriginalMessageIDThroughSQS(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	url := mototest.NewQueue(t, cfg, false, nil)
	bin := events.SQSMessageAttribute{DataType: "Binary", BinaryValue: []byte{0, 0xff, 0x80, 'i', 'd'}}
	custom := events.SQSMessageAttribute{DataType: "Binary.uuid", BinaryValue: []byte{0x0e, 0x9d}}
	recs := []events.SQSMessage{
		{MessageId: "binary", Body: "binary", MessageAttributes: map[string]events.SQSMessageAttribute{AttrOriginalMessageID: bin}},
		{MessageId: "custom", Body: "custom", MessageAttributes: map[string]events.SQSMessageAttribute{AttrOriginalMessageID: custom}},
		{MessageId: "none", Body: "none"},
	}
	want := map[string]string{"binary": "Binary:00ff806964", "custom": "Binary.uuid:0e9d", "none": "String:none"}
	var es []Entry
	for _, r := range recs {
		es = append(es, ForwardEntry(r, url, "permanent-error"))
	}
	if failed := SendBatch(context.Background(), sqs.NewFromConfig(cfg), url, es); len(failed) != 0 {
		t.Fatalf("send: %v", failed)
	}
	got := mototest.Receive(t, cfg, url, len(recs), 10*time.Second)
	if len(got) != len(recs) {
		t.Fatalf("received %d messages, want %d", len(got), len(recs))
	}
	for _, m := range got {
		a := m.MessageAttributes[AttrOriginalMessageID]
		v := aws.ToString(a.DataType) + ":" + aws.ToString(a.StringValue)
		if a.BinaryValue != nil {
			v = fmt.Sprintf("%s:%x", aws.ToString(a.DataType), a.BinaryValue)
		}
		if w := want[aws.ToString(m.Body)]; v != w {
			t.Errorf("%s: original id %s, want %s", aws.ToString(m.Body), v, w)
		}
	}
}
