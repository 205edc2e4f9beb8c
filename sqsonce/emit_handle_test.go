package sqsonce

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// flakySender fails every send while failing is set, and counts the
// messages it accepted by id.
type flakySender struct {
	mu      sync.Mutex
	failing bool
	byID    map[string]int
}

func (s *flakySender) Send(_ context.Context, msgs []Outgoing) []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if s.failing {
			errs[i] = errors.New("throttled")
			continue
		}
		s.byID[m.ID]++
	}
	return errs
}

// TestHandleEmitPendingIsRetriedAndRelayed: Handle's record whose emitted
// message could not be sent is reported failed (retried, not deleted),
// with reason emit-pending; its redelivery sends the message, with the
// same id, without running the handler, and is then deleted as a
// duplicate.
func TestHandleEmitPendingIsRetriedAndRelayed(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be)
		sender := &flakySender{failing: true, byID: map[string]int{}}
		cfg := b.cfg
		cfg.Sender = sender
		var outcomes []Outcome
		cfg.OnOutcome = func(_ context.Context, o Outcome) { outcomes = append(outcomes, o) }
		runs := 0
		p := mustProcessor(t, cfg, func(ctx context.Context, msg events.SQSMessage) error {
			runs++
			return Emit(ctx, Message{To: "sqs:https://sqs.us-east-1.amazonaws.com/123456789012/next", Body: msg.Body})
		}, b.sqs)
		rec := procRecord("m-1", "order A-1")
		if failed := handleWith(t, p, rec); !slices.Equal(failed, []string{"m-1"}) {
			t.Fatalf("failed %v; want [m-1]: a record whose messages are pending is retried", failed)
		}
		if len(outcomes) != 1 || outcomes[0].Kind != KindFailed || outcomes[0].Reason != ReasonEmitPending || !errors.Is(outcomes[0].Err, ErrEmitPending) {
			t.Fatalf("outcomes %+v; want one Failed/emit-pending", outcomes)
		}
		sender.mu.Lock()
		sender.failing = false
		sender.mu.Unlock()
		if failed := handleWith(t, p, rec); len(failed) != 0 {
			t.Fatalf("the redelivery failed %v; want it deleted once the message is sent", failed)
		}
		if runs != 1 {
			t.Errorf("the handler ran %d times; want once", runs)
		}
		if len(sender.byID) != 1 {
			t.Errorf("sent %v; want one message", sender.byID)
		}
		if o := outcomes[len(outcomes)-1]; o.Kind != KindDuplicate {
			t.Errorf("the redelivery's outcome %+v; want Duplicate", o)
		}
	})
}
