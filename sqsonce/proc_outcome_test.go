package sqsonce

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

func TestAHandlerThatExitsOddlyIsAFailure(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be)
		b.handler.hook = func(_ context.Context, msg events.SQSMessage) {
			if msg.MessageId == "exits" {
				runtime.Goexit() // what t.FailNow, or a careless library, does
			}
		}
		failed := b.handle(t, procRecord("exits", "x"), procRecord("ok", "y"))
		if !slices.Equal(failed, []string{"exits"}) {
			t.Fatalf("failed %v, want [exits]: an exit without a return must not delete the message", failed)
		}
		// The lock was released: the redelivery runs at once.
		b.handler.hook = nil
		if failed := b.handle(t, procRecord("exits", "x")); len(failed) != 0 {
			t.Fatalf("redelivery failed %v: the lock was left held", failed)
		}
	})
}

func TestHandlerSeesItsKeyAndFence(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be)
		type seen struct {
			key   string
			fence int64
		}
		got := make(chan seen, 2)
		b.handler.hook = func(ctx context.Context, _ events.SQSMessage) {
			got <- seen{Key(ctx), Fence(ctx)}
		}
		b.handler.errs["m-1"] = errors.New("first attempt fails")
		b.handle(t, procRecord("m-1", "x"))
		delete(b.handler.errs, "m-1")
		b.handle(t, procRecord("m-1", "x"))
		first, second := <-got, <-got
		// A released lock keeps its record, so the retry's fence is one more.
		if first.key != "m-1" || second.key != "m-1" || first.fence <= 0 || second.fence != first.fence+1 {
			t.Errorf("handler saw %+v then %+v, want key m-1, the fence growing by one", first, second)
		}
	})
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
			eachBackend(t, func(t *testing.T, be procBackend) {
				b := procSetup(t, be)
				b.cfg.OperatorQueueURL = tt.url
				// The error names the setting as it was given: the variable
				// from the environment, the field from Go.
				for setting, cfg := range map[string]ConsumerConfig{"OPERATOR_QUEUE_URL": b.cfg, "ConsumerConfig.OperatorQueueURL": goConfig(b.cfg)} {
					p := mustProcessor(t, cfg, b.handler.handle, b.sqs)
					_, err := p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{procRecord("m-1", "x")}})
					if tt.loop {
						if !errors.Is(err, ErrQueueLoop) || !strings.Contains(err.Error(), setting) {
							t.Fatalf("error %v, want one naming %s as the consumed queue", err, setting)
						}
						if calls := b.handler.Calls(); len(calls) != 0 {
							t.Errorf("handler ran %v under a configuration that loops", calls)
						}
						continue
					}
					if err != nil {
						t.Fatalf("another queue refused: %v", err)
					}
				}
			})
		})
	}
}
