package processor_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/internal/processor"
)

func TestABusinessFunctionThatExitsOddlyIsAFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.business.hook = func(_ context.Context, msg events.SQSMessage) {
		if msg.MessageId == "exits" {
			runtime.Goexit() // what t.FailNow, or a careless library, does
		}
	}
	failed := b.handle(t, record("exits", "x"), record("ok", "y"))
	if !slices.Equal(failed, []string{"exits"}) {
		t.Fatalf("failed %v, want [exits]: an exit without a return must not delete the message", failed)
	}
	// The lock was released: the redelivery runs at once.
	b.business.hook = nil
	if failed := b.handle(t, record("exits", "x")); len(failed) != 0 {
		t.Fatalf("redelivery failed %v: the lock was left held", failed)
	}
}

func TestBusinessSeesItsKeyAndFence(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type seen struct {
		key   string
		fence int64
	}
	got := make(chan seen, 2)
	b.business.hook = func(ctx context.Context, _ events.SQSMessage) {
		got <- seen{processor.IdempotencyKey(ctx), processor.FenceToken(ctx)}
	}
	b.business.errs["m-1"] = errors.New("first attempt fails")
	b.handle(t, record("m-1", "x"))
	delete(b.business.errs, "m-1")
	b.handle(t, record("m-1", "x"))
	first, second := <-got, <-got
	// A released lock keeps its record, so the retry's fence is one more.
	if first.key != "m-1" || second.key != "m-1" || first.fence <= 0 || second.fence != first.fence+1 {
		t.Errorf("business saw %+v then %+v, want key m-1, the fence growing by one", first, second)
	}
}

func TestOperatorQueueThatIsTheSourceFailsTheInvocation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url  string
		loop bool
	}{
		{"https://sqs.us-east-1.amazonaws.com/123456789012/orders", true},
		{"https://us-east-1.queue.amazonaws.com/123456789012/orders", true},
		{"http://127.0.0.1:4566/123456789012/orders", true}, // a local endpoint names no region
		{"https://sqs.eu-west-1.amazonaws.com/123456789012/orders", false},
		{"https://sqs.us-east-1.amazonaws.com/123456789012/orders-operator", false},
		{"https://sqs.us-east-1.amazonaws.com/210987654321/orders", false},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.cfg.OperatorQueueURL = tt.url
			h := b.newHandler(t)
			_, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("m-1", "x")}})
			if tt.loop {
				if !errors.Is(err, processor.ErrOperatorQueueIsSource) || !strings.Contains(err.Error(), "OPERATOR_QUEUE_URL") {
					t.Fatalf("error %v, want one naming OPERATOR_QUEUE_URL as the consumed queue", err)
				}
				if calls := b.business.Calls(); len(calls) != 0 {
					t.Errorf("business ran %v under a configuration that loops", calls)
				}
				return
			}
			if err != nil {
				t.Fatalf("another queue refused: %v", err)
			}
		})
	}
}
