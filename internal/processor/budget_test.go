package processor_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/processor"
	"github.com/sqs-once/sqs-once/internal/retrybudget"
)

func TestRecordsAreNotStartedInsideTheReserve(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *processor.Config) { c.MaxConcurrency = 1 })
	// 10 s left: the reserve is a tenth, 1 s. The first record takes 9.2 s
	// of it, so the others would start inside the reserve.
	ctx, cancel := context.WithDeadline(context.Background(), b.clock.Now().Add(10*time.Second))
	defer cancel()
	b.business.hook = func(context.Context, events.SQSMessage) { b.clock.Advance(9200 * time.Millisecond) }
	resp, err := b.handler.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{record("m-1", "x"), record("m-2", "y"), record("m-3", "z")}})
	if err != nil {
		t.Fatal(err)
	}
	if failed := failedIDs(resp); !slices.Equal(failed, []string{"m-2", "m-3"}) {
		t.Errorf("failed %v, want the two records that could not start [m-2 m-3]: never lost, retried", failed)
	}
	if calls := b.business.Calls(); !slices.Equal(calls, []string{"m-1"}) {
		t.Errorf("business ran %v, want only m-1", calls)
	}
}

func TestReserveIsATenthOfTheInvocationWithinBounds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		left, reserve time.Duration
	}{
		{3 * time.Second, retrybudget.MinReserve},
		{20 * time.Second, 2 * time.Second},
		{15 * time.Minute, retrybudget.MaxReserve},
	}
	for _, tt := range tests {
		t.Run(tt.left.String(), func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(c *processor.Config) { c.MaxConcurrency = 1 })
			ctx, cancel := context.WithDeadline(context.Background(), b.clock.Now().Add(tt.left))
			defer cancel()
			// a ends a millisecond before the reserve, so b may start; b
			// takes that millisecond, so c may not.
			took := map[string]time.Duration{"a": tt.left - tt.reserve - time.Millisecond, "b": time.Millisecond}
			b.business.hook = func(_ context.Context, m events.SQSMessage) { b.clock.Advance(took[m.MessageId]) }
			resp, _ := b.handler.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{record("a", "x"), record("b", "y"), record("c", "z")}})
			if failed := failedIDs(resp); !slices.Equal(failed, []string{"c"}) {
				t.Errorf("failed %v, want [c]: the reserve of %v is %v", failed, tt.left, tt.reserve)
			}
		})
	}
}

func TestFailureBackoffStaysWithinSQSsTwelveHours(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *processor.Config) { c.FailureBackoffBase = 10 * time.Minute })
	rec := &visibilityRecorder{}
	h := mustNew(t, b.cfg, processor.Deps{DynamoDB: b.dynamo, SQS: rec, Business: b.business.Handle, Now: b.clock.Now,
		Rand: func() float64 { return 0.99 }})
	firstReceived := func(ago time.Duration) func(*events.SQSMessage) {
		return func(m *events.SQSMessage) {
			m.Attributes["ApproximateReceiveCount"] = "10" // a backoff of hours
			m.Attributes["ApproximateFirstReceiveTimestamp"] = strconv.FormatInt(b.clock.Now().Add(-ago).UnixMilli(), 10)
		}
	}
	records := []events.SQSMessage{
		record("fresh", "x", firstReceived(time.Minute)),
		record("old", "x", firstReceived(11*time.Hour)),
		record("ancient", "x", firstReceived(11*time.Hour+59*time.Minute+30*time.Second)),
	}
	for _, r := range records {
		b.business.errs[r.MessageId] = errors.New("fail")
	}
	resp, _ := h.Handle(context.Background(), events.SQSEvent{Records: records})
	if failed := failedIDs(resp); len(failed) != 3 {
		t.Fatalf("failed %v, want all three", failed)
	}
	got := map[string]int32{}
	for _, in := range rec.ins {
		for _, e := range in.Entries {
			got[aws.ToString(e.ReceiptHandle)] = e.VisibilityTimeout
		}
	}
	// 0.99 of the 11 h 40 min cap for the fresh one; the old one has 59
	// minutes left of SQS's 12 hours (one kept for clock skew); the ancient
	// one has none, so it gets no backoff rather than a refused call.
	if got["rh-fresh"] < 41000 || got["rh-old"] < 3539 || got["rh-old"] > 3540 || len(got) != 2 {
		t.Errorf("visibility timeouts %v, want fresh ~41580, old 3540, ancient absent", got)
	}
}

func TestARefusedVisibilityChangeLeavesTheRecordFailed(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *processor.Config) { c.FailureBackoffBase = 10 * time.Second })
	url, ev := receiveEvent(t, b, nil, "fails")
	ev.Records[0].ReceiptHandle = "not-a-receipt-handle"
	b.business.errs[ev.Records[0].MessageId] = errors.New("downstream 503")
	resp, err := b.handler.Handle(context.Background(), ev)
	if err != nil || !slices.Equal(failedIDs(resp), []string{ev.Records[0].MessageId}) {
		t.Fatalf("response %v, %v: a record whose backoff SQS refused must still be reported failed", failedIDs(resp), err)
	}
	if out, err := b.sqs.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessagesNotVisible"}}); err != nil || out.Attributes["ApproximateNumberOfMessagesNotVisible"] != "1" {
		t.Errorf("the message is not in flight (%v, %v): it must stay in the queue", out, err)
	}
}
