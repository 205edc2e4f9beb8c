package sqsonce

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/sqsonce/store"
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

// emitter is a processor on b whose handler emits one message per record
// through sender, with what it observed: its outcomes, and how often the
// handler ran.
type emitter struct {
	p        *Processor
	outcomes []Outcome
	runs     int
}

func newEmitter(t *testing.T, b *procBundle, sender Sender) *emitter {
	t.Helper()
	e := &emitter{}
	cfg := b.cfg
	cfg.Sender = sender
	cfg.OnOutcome = func(_ context.Context, o Outcome) { e.outcomes = append(e.outcomes, o) }
	e.p = mustProcessor(t, cfg, func(ctx context.Context, msg events.SQSMessage) error {
		e.runs++
		return Emit(ctx, Message{To: "sqs:https://sqs.us-east-1.amazonaws.com/123456789012/next", Body: msg.Body})
	}, b.sqs)
	return e
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
		e := newEmitter(t, b, sender)
		p := e.p
		rec := procRecord("m-1", "order A-1")
		if failed := handleWith(t, p, rec); !slices.Equal(failed, []string{"m-1"}) {
			t.Fatalf("failed %v; want [m-1]: a record whose messages are pending is retried", failed)
		}
		if len(e.outcomes) != 1 || e.outcomes[0].Kind != KindFailed || e.outcomes[0].Reason != ReasonEmitPending || !errors.Is(e.outcomes[0].Err, ErrEmitPending) {
			t.Fatalf("outcomes %+v; want one Failed/emit-pending", e.outcomes)
		}
		sender.mu.Lock()
		sender.failing = false
		sender.mu.Unlock()
		if failed := handleWith(t, p, rec); len(failed) != 0 {
			t.Fatalf("the redelivery failed %v; want it deleted once the message is sent", failed)
		}
		if e.runs != 1 {
			t.Errorf("the handler ran %d times; want once", e.runs)
		}
		if len(sender.byID) != 1 {
			t.Errorf("sent %v; want one message", sender.byID)
		}
		if o := e.outcomes[len(e.outcomes)-1]; o.Kind != KindDuplicate {
			t.Errorf("the redelivery's outcome %+v; want Duplicate", o)
		}
	})
}

// answerLostStore applies every Complete and then answers it with an
// error while lose is set: a completion written whose answer never came
// back, on every attempt.
type answerLostStore struct {
	store.Store
	mu   sync.Mutex
	lose bool
}

func (s *answerLostStore) Complete(ctx context.Context, lease store.Lease, c store.Completion) error {
	err := s.Store.Complete(ctx, lease, c)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lose {
		return errors.New("read tcp: connection reset by peer")
	}
	return err
}

// TestHandleCompletionUnknownWithEmitsIsRetried: a completion that carries
// emitted messages and whose outcome is unknown (the store's answer lost on
// every attempt, or the store down) does not delete the record, as a plain
// unrecorded completion does: deleted, its messages would never be sent
// if it was written, and lost with the work if it was not. It is reported
// commit-unknown, the lock left to expire; the redelivery relays the
// messages of a completion that was written (the handler not run again),
// or, once the lock has expired, runs the work again for one that was not.
// Either way the message reaches its destination once.
func TestHandleCompletionUnknownWithEmitsIsRetried(t *testing.T) {
	t.Parallel()
	for _, written := range []bool{true, false} {
		name := map[bool]string{true: "written", false: "not-written"}[written]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var lost *answerLostStore
			b := procSetup(t, memoryBackend, func(c *ConsumerConfig) {
				if written {
					lost = &answerLostStore{Store: c.Store, lose: true}
					c.Store = lost
				}
			})
			if !written {
				b.faults.fail("complete", errors.New("dial tcp: connection refused"))
			}
			sender := &flakySender{byID: map[string]int{}}
			e := newEmitter(t, b, sender)
			p := e.p
			rec := procRecord("m-1", "order A-1")
			if failed := handleWith(t, p, rec); !slices.Equal(failed, []string{"m-1"}) {
				t.Fatalf("failed %v; want [m-1]: a completion with messages whose outcome is unknown is retried, not deleted", failed)
			}
			if len(e.outcomes) != 1 || e.outcomes[0].Kind != KindFailed || e.outcomes[0].Reason != ReasonCommitUnknown {
				t.Fatalf("outcomes %+v; want one Failed/commit-unknown", e.outcomes)
			}
			if len(sender.byID) != 0 {
				t.Fatalf("sent %v before the completion was known written", sender.byID)
			}
			if written {
				lost.mu.Lock()
				lost.lose = false
				lost.mu.Unlock()
			} else {
				b.faults.fail("complete", nil)
				// The lock, left to expire, is taken over after it.
				if failed := handleWith(t, p, rec); !slices.Equal(failed, []string{"m-1"}) {
					t.Fatalf("redelivery within the lock: failed %v, want [m-1]", failed)
				}
				b.clock.Advance(61 * time.Second)
			}
			if failed := handleWith(t, p, rec); len(failed) != 0 {
				t.Fatalf("the redelivery failed %v; want it deleted once its message is sent", failed)
			}
			wantRuns := map[bool]int{true: 1, false: 2}[written]
			if e.runs != wantRuns {
				t.Errorf("the handler ran %d times; want %d", e.runs, wantRuns)
			}
			if len(sender.byID) != 1 {
				t.Errorf("sent %v; want one message, once", sender.byID)
			}
			for id, n := range sender.byID {
				if n != 1 {
					t.Errorf("message %s sent %d times; want once", id, n)
				}
			}
		})
	}
}
