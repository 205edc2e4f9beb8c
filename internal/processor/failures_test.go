package processor_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/local/localesm"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/processor"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
)

// receiveEvent sends bodies to a fresh queue and receives them back as the
// Lambda event the event source mapping would deliver.
func receiveEvent(t *testing.T, b *bundle, queueAttrs map[string]string, bodies ...string) (string, events.SQSEvent) {
	t.Helper()
	url := mototest.NewQueue(t, b.aws, false, queueAttrs)
	for _, body := range bodies {
		if _, err := b.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(body),
			MessageAttributes: map[string]sqstypes.MessageAttributeValue{"trace": sqsmsg.String("t-1")}}); err != nil {
			t.Fatal(err)
		}
	}
	msgs := mototest.Receive(t, b.aws, url, len(bodies), 5*time.Second)
	attrs, err := b.sqs.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := localesm.NewEvent(msgs, attrs.Attributes["QueueArn"], "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	return url, ev
}

func TestPermanentFailureGoesToOperatorQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	operator := mototest.NewQueue(t, b.aws, false, nil)
	b.cfg.OperatorQueueURL = operator
	b.handler = b.newHandler(t)
	_, ev := receiveEvent(t, b, nil, "never parses", "fine")
	poison := ev.Records[0].MessageId
	if ev.Records[0].Body != "never parses" {
		poison = ev.Records[1].MessageId
	}
	b.business.errs[poison] = processor.Permanent(errors.New("unparsable body"))

	resp, _ := b.handler.Handle(context.Background(), ev)
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failed %v: a forwarded message must be deleted from the main queue", resp.BatchItemFailures)
	}
	got := mototest.Receive(t, b.aws, operator, 1, 5*time.Second)
	if len(got) != 1 {
		t.Fatalf("operator queue holds %d messages, want 1", len(got))
	}
	m := got[0]
	if aws.ToString(m.Body) != "never parses" ||
		aws.ToString(m.MessageAttributes[sqsmsg.AttrReason].StringValue) != processor.ReasonPermanent ||
		aws.ToString(m.MessageAttributes["trace"].StringValue) != "t-1" {
		t.Errorf("operator message body %q attrs %v: want the body, its attributes and sqs-once-reason=%s",
			aws.ToString(m.Body), m.MessageAttributes, processor.ReasonPermanent)
	}
}

func TestPermanentFailureIsRetriedWhenOperatorQueueUnavailable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		operator bool
	}{
		{"no operator queue configured", false},
		{"operator queue rejects the message", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			if tt.operator {
				b.cfg.OperatorQueueURL = mototest.URL(t) + "/123456789012/does-not-exist"
				b.handler = b.newHandler(t)
			}
			b.business.errs["p"] = processor.Permanent(errors.New("bad"))
			if failed := b.handle(t, record("p", "x")); !slices.Equal(failed, []string{"p"}) {
				t.Errorf("failed %v, want [p]: the message is deleted only once the operator queue holds it", failed)
			}
		})
	}
}

func TestFailureBackoffHidesFailedRecords(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *processor.Config) { c.FailureBackoffBase = 10 * time.Second })
	// Visibility timeout 0: without the backoff the failed message would be
	// receivable again at once.
	url, ev := receiveEvent(t, b, map[string]string{"VisibilityTimeout": "0"}, "fails", "works")
	for _, r := range ev.Records {
		if r.Body == "fails" {
			b.business.errs[r.MessageId] = errors.New("downstream 503")
		}
	}
	resp, _ := b.handler.Handle(context.Background(), ev)
	if len(resp.BatchItemFailures) != 1 {
		t.Fatalf("failures %v, want 1", resp.BatchItemFailures)
	}
	out, err := b.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range out.Messages {
		if aws.ToString(m.Body) == "fails" {
			t.Fatal("the failed record is visible again at once: its visibility was not changed")
		}
	}
}

// visibilityRecorder captures the visibility changes the handler asks for.
type visibilityRecorder struct {
	processor.SQSAPI
	mu  sync.Mutex
	ins []*sqs.ChangeMessageVisibilityBatchInput
}

func (v *visibilityRecorder) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.ins = append(v.ins, in)
	return &sqs.ChangeMessageVisibilityBatchOutput{}, nil
}

func TestFailureBackoffGrowsWithReceiveCount(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *processor.Config) { c.FailureBackoffBase = 10 * time.Second })
	rec := &visibilityRecorder{}
	h := mustNew(t, b.cfg, processor.Deps{DynamoDB: b.dynamo, SQS: rec, Business: b.business.Handle,
		Rand: func() float64 { return 0.5 }})
	var records []events.SQSMessage
	receives := []string{"1", "2", "3", "12", "40"}
	for i, n := range receives {
		id := ids("m", len(receives))[i]
		b.business.errs[id] = errors.New("fail")
		records = append(records, record(id, "x", func(m *events.SQSMessage) { m.Attributes["ApproximateReceiveCount"] = n }))
	}
	// 11 more failures: a batch of 16 needs two ChangeMessageVisibilityBatch calls.
	for _, id := range ids("extra", 11) {
		b.business.errs[id] = errors.New("fail")
		records = append(records, record(id, "x"))
	}
	h.Handle(context.Background(), events.SQSEvent{Records: records})

	if len(rec.ins) != 2 || len(rec.ins[0].Entries) != 10 || len(rec.ins[1].Entries) != 6 {
		t.Fatalf("%d visibility calls, want 2 batches (10 + 6)", len(rec.ins))
	}
	if url := aws.ToString(rec.ins[0].QueueUrl); !strings.HasSuffix(url, "/123456789012/orders") {
		t.Errorf("queue URL %s not derived from the event source ARN", url)
	}
	// Equal jitter with r = 0.5: 0.75 × min(11 h 40 min, 10 s × 2^n). The cap
	// stays under SQS's 12 hours from the receive.
	want := []int32{15, 30, 60, 30720, 31500}
	byHandle := map[string]int32{}
	for _, e := range rec.ins[0].Entries {
		byHandle[aws.ToString(e.ReceiptHandle)] = e.VisibilityTimeout
	}
	for i, id := range ids("m", len(receives)) {
		if got := byHandle["rh-"+id]; got != want[i] {
			t.Errorf("receive count %s: visibility %d s, want %d s", receives[i], got, want[i])
		}
	}
}

func TestPermanentFailureOnFIFOKeepsItsGroup(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.OperatorQueueURL = mototest.NewQueue(t, b.aws, true, nil)
	b.handler = b.newHandler(t)
	b.business.errs["a1"] = processor.Permanent(errors.New("bad"))
	// a2 waits for the next delivery: the forward is confirmed only after the
	// group has run, and a2 must not overtake a1 if the forward fails.
	if failed := b.handle(t, record("a1", "x", fifo("a")), record("a2", "y", fifo("a"))); !slices.Equal(failed, []string{"a2"}) {
		t.Fatalf("failed %v, want [a2]", failed)
	}
	got := mototest.Receive(t, b.aws, b.cfg.OperatorQueueURL, 1, 5*time.Second)
	if len(got) != 1 || got[0].Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)] != "a" {
		t.Fatalf("operator queue got %+v, want the message in its group a", got)
	}
	if got := b.business.Calls(); !slices.Equal(got, []string{"a1"}) {
		t.Errorf("business calls %v, want [a1]", got)
	}
}

// TestFailureOnTheLastReceiveIsNotDelayed: a record that fails on the last
// receive the queue's redrive policy allows (maxReceiveCount 2 here) is left
// visible, so the next receive moves it to the dead-letter queue at once
// instead of after the longest backoff of its life. Earlier failures, and a
// processor that does not know the queue (no QueueURL), back off as before.
func TestFailureOnTheLastReceiveIsNotDelayed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		receives  int
		knowQueue bool
		wantDLQ   bool
	}{
		{"last receive", 2, true, true},
		{"an earlier receive", 1, true, false},
		{"queue unknown", 2, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := context.Background()
			dlq := mototest.NewQueue(t, b.aws, false, nil)
			main := mototest.NewQueue(t, b.aws, false, map[string]string{
				"VisibilityTimeout": "0",
				"RedrivePolicy":     `{"deadLetterTargetArn":"` + mototest.QueueARN(t, b.aws, dlq) + `","maxReceiveCount":"2"}`,
			})
			b.cfg.FailureBackoffBase = 10 * time.Second
			if tt.knowQueue {
				b.cfg.QueueURL = main
			}
			b.handler = b.newHandler(t)
			if _, err := b.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &main, MessageBody: aws.String("poison")}); err != nil {
				t.Fatal(err)
			}
			var msgs []sqstypes.Message
			for range tt.receives {
				if msgs = mototest.Receive(t, b.aws, main, 1, 5*time.Second); len(msgs) != 1 {
					t.Fatalf("received %d messages, want 1", len(msgs))
				}
			}
			ev, err := localesm.NewEvent(msgs, mototest.QueueARN(t, b.aws, main), "us-east-1")
			if err != nil {
				t.Fatal(err)
			}
			b.business.errs[ev.Records[0].MessageId] = errors.New("downstream 503")
			if resp, _ := b.handler.Handle(ctx, ev); len(resp.BatchItemFailures) != 1 {
				t.Fatalf("failures %v, want the record", resp.BatchItemFailures)
			}
			// The main queue's visibility timeout is 0: only the backoff
			// keeps the message from this receive, which moves it to the
			// dead-letter queue once it has been received twice.
			if out, err := b.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &main}); err != nil {
				t.Fatal(err)
			} else if len(out.Messages) > 0 {
				t.Fatalf("the main queue delivered the message again (receive count %d): the backoff was not applied",
					tt.receives+1)
			}
			got := mototest.Receive(t, b.aws, dlq, 1, time.Second)
			if dead := len(got) == 1; dead != tt.wantDLQ {
				t.Errorf("in the dead-letter queue: %v, want %v", dead, tt.wantDLQ)
			}
		})
	}
}
