package sqsonce

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/internal/retrybudget"
)

func TestRecordsAreNotStartedInsideTheReserve(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be, func(c *ConsumerConfig) { c.MaxConcurrency = 1 })
		// 10 s left: the reserve is a tenth, 1 s. The first record takes 9.2 s
		// of it, so the others would start inside the reserve.
		ctx, cancel := context.WithDeadline(context.Background(), b.clock.Now().Add(10*time.Second))
		defer cancel()
		b.handler.hook = func(context.Context, events.SQSMessage) { b.clock.Advance(9200 * time.Millisecond) }
		resp, err := b.processor.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{procRecord("m-1", "x"), procRecord("m-2", "y"), procRecord("m-3", "z")}})
		if err != nil {
			t.Fatal(err)
		}
		if failed := failedOf(resp); !slices.Equal(failed, []string{"m-2", "m-3"}) {
			t.Errorf("failed %v, want the two records that could not start [m-2 m-3]: never lost, retried", failed)
		}
		if calls := b.handler.Calls(); !slices.Equal(calls, []string{"m-1"}) {
			t.Errorf("handler ran %v, want only m-1", calls)
		}
	})
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
			eachBackend(t, func(t *testing.T, be procBackend) {
				b := procSetup(t, be, func(c *ConsumerConfig) { c.MaxConcurrency = 1 })
				ctx, cancel := context.WithDeadline(context.Background(), b.clock.Now().Add(tt.left))
				defer cancel()
				// a ends a millisecond before the reserve, so b may start; b
				// takes that millisecond, so c may not.
				took := map[string]time.Duration{"a": tt.left - tt.reserve - time.Millisecond, "b": time.Millisecond}
				b.handler.hook = func(_ context.Context, m events.SQSMessage) { b.clock.Advance(took[m.MessageId]) }
				resp, _ := b.processor.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{procRecord("a", "x"), procRecord("b", "y"), procRecord("c", "z")}})
				if failed := failedOf(resp); !slices.Equal(failed, []string{"c"}) {
					t.Errorf("failed %v, want [c]: the reserve of %v is %v", failed, tt.left, tt.reserve)
				}
			})
		})
	}
}

func TestFailureBackoffStaysWithinSQSsTwelveHours(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be, func(c *ConsumerConfig) {
			c.FailureBackoffBase = 10 * time.Minute
			c.Test.Rand = func() float64 { return 0.99 }
		})
		rec := newFakeQueues()
		p := mustProcessor(t, b.cfg, b.handler.handle, rec)
		firstReceived := func(ago time.Duration) func(*events.SQSMessage) {
			return func(m *events.SQSMessage) {
				m.Attributes["ApproximateReceiveCount"] = "10" // a backoff of hours
				m.Attributes["ApproximateFirstReceiveTimestamp"] = strconv.FormatInt(b.clock.Now().Add(-ago).UnixMilli(), 10)
			}
		}
		records := []events.SQSMessage{
			procRecord("fresh", "x", firstReceived(time.Minute)),
			procRecord("old", "x", firstReceived(11*time.Hour)),
			procRecord("ancient", "x", firstReceived(11*time.Hour+59*time.Minute+30*time.Second)),
		}
		for _, r := range records {
			b.handler.errs[r.MessageId] = errors.New("fail")
		}
		if failed := handleWith(t, p, records...); len(failed) != 3 {
			t.Fatalf("failed %v, want all three", failed)
		}
		got := rec.visibilityChanges()
		// 0.99 of the 11 h 40 min cap for the fresh one; the old one has 59
		// minutes left of SQS's 12 hours (one kept for clock skew); the
		// ancient one has none, so it gets no backoff rather than a refused
		// call.
		if got["rh-fresh"] < 41000 || got["rh-old"] < 3539 || got["rh-old"] > 3540 || len(got) != 2 {
			t.Errorf("visibility timeouts %v, want fresh ~41580, old 3540, ancient absent", got)
		}
	})
}

// inFlightCounter is a queueSide that can count a queue's messages in
// flight (moto_server's).
type inFlightCounter interface {
	inFlight(t testing.TB, url string) string
}

func TestARefusedVisibilityChangeLeavesTheRecordFailed(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be, withBackoff)
		url, ev := receiveEvent(t, b, nil, "fails")
		ev.Records[0].ReceiptHandle = badReceiptHandle
		b.handler.errs[ev.Records[0].MessageId] = errors.New("downstream 503")
		resp, err := b.processor.Handle(context.Background(), ev)
		if err != nil || !slices.Equal(failedOf(resp), []string{ev.Records[0].MessageId}) {
			t.Fatalf("response %v, %v: a record whose backoff SQS refused must still be reported failed", failedOf(resp), err)
		}
		if q, ok := b.queues.(inFlightCounter); ok {
			if n := q.inFlight(t, url); n != "1" {
				t.Errorf("%s messages in flight: the message must stay in the queue", n)
			}
		}
	})
}
