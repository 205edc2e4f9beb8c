package sqsonce

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
)

// withTarget is a processor on b's store delivering to tg instead of
// calling a Handler, keyed on the order id.
func withTarget(t *testing.T, b *procBundle, tg Target) *Processor {
	t.Helper()
	cfg := b.cfg
	cfg.Target = tg
	cfg.Key = KeyFromBody("/orderId")
	return mustProcessor(t, cfg, nil, b.sqs)
}

func orderRecord(id, orderID string) events.SQSMessage {
	return procRecord(id, fmt.Sprintf(`{"orderId":%q}`, orderID), withMsgAttr("tenant", "String", "acme"), withMsgAttr("amount", "Number.float", "12.50"))
}

// deliverTwice is the acceptance run of targets: a batch whose keys repeat
// is delivered (the record that lost the race for its key is retried), then
// SQS delivers every message again with new ids, as a producer's retry
// would.
func deliverTwice(t *testing.T, p *Processor) {
	t.Helper()
	first := []events.SQSMessage{orderRecord("m1", "o-1"), orderRecord("m2", "o-2"), orderRecord("m3", "o-1"), orderRecord("m4", "o-3")}
	failed := handleWith(t, p, first...)
	for _, id := range failed {
		if id != "m1" && id != "m3" {
			t.Errorf("%s failed in the first batch: only one of m1 and m3 (same key) may wait", id)
		}
	}
	var again []events.SQSMessage
	for _, r := range first {
		if slices.Contains(failed, r.MessageId) {
			again = append(again, r)
		}
		again = append(again, orderRecord("re-"+r.MessageId, strings.Split(r.Body, `"`)[3]))
	}
	if failed := handleWith(t, p, again...); len(failed) != 0 {
		t.Errorf("second delivery failed %v; every key is done", failed)
	}
}

// scriptedTarget is a Target that records what it is given and answers
// each message with answer's error (nil: all accepted).
type scriptedTarget struct {
	mu     sync.Mutex
	calls  [][]Delivery
	answer func(call int, d Delivery) error
	// short, when set, makes a call answer for one message fewer than it
	// got.
	short bool
}

func (s *scriptedTarget) Deliver(_ context.Context, msgs []Delivery) []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, slices.Clone(msgs))
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if s.answer != nil {
			errs[i] = s.answer(len(s.calls), m)
		}
	}
	if s.short {
		return errs[:len(errs)-1]
	}
	return errs
}

// delivered are the deliveries of every call, in order.
func (s *scriptedTarget) delivered() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []Delivery
	for _, c := range s.calls {
		all = append(all, c...)
	}
	return all
}

func (s *scriptedTarget) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// TestTargetGetsEachKeyOnce: with a Target instead of a Handler, each key
// is delivered once, with its key and fence, whatever the batch and the
// redeliveries (TestTargetSQSExactlyOncePerKey and its kin do it to real
// destinations on moto_server).
func TestTargetGetsEachKeyOnce(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be)
		tg := &scriptedTarget{}
		deliverTwice(t, withTarget(t, b, tg))
		count := map[string]int{}
		for _, d := range tg.delivered() {
			count[d.Key]++
			if !strings.Contains(d.Record.Body, d.Key) || d.Fence <= 0 || d.Record.MessageAttributes["tenant"].DataType != "String" {
				t.Errorf("delivery %+v: want the record intact, its order id as key and a fence", d)
			}
		}
		for _, o := range []string{"o-1", "o-2", "o-3"} {
			if count[o] != 1 {
				t.Errorf("order %s delivered %d times, want exactly once (deliveries %v)", o, count[o], count)
			}
		}
		if tg.callCount() > 2 {
			t.Errorf("%d Deliver calls, want at most one per batch", tg.callCount())
		}
	})
}

// A message the destination can never take goes to the operator queue with
// reason target-refused, and fails no other record of the batch.
func TestTargetRefusedRecordGoesToTheOperatorQueue(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be)
		operator := b.queues.newQueue(t, false, nil)
		b.cfg.OperatorQueueURL = operator
		tg := &scriptedTarget{answer: func(_ int, d Delivery) error {
			if d.Key == "o-big" {
				return fmt.Errorf("%w: event too large", ErrTargetRefused)
			}
			return nil
		}}
		p := withTarget(t, b, tg)
		if failed := handleWith(t, p, orderRecord("m1", "o-1"), orderRecord("big", "o-big"), orderRecord("m2", "o-2")); len(failed) != 0 {
			t.Fatalf("failed %v, want none: the refused record is forwarded, the others delivered", failed)
		}
		fwd := b.queues.received(t, operator, 1)
		if len(fwd) != 1 || reasonOf(fwd[0]) != ReasonTargetRefused || !strings.Contains(aws.ToString(fwd[0].Body), "o-big") {
			t.Fatalf("operator queue got %v, want the big record with reason %s", fwd, ReasonTargetRefused)
		}
		checkProcMetrics(t, b, b.clock.Now(), 1, metricCounts{"Processed": 2, "ForwardedToOperator": 1, "ForwardedToOperator/target-refused": 1})
	})
}

// The target's answer per message fails exactly the records it refused:
// they are retried (and delivered again), the others completed (and never
// delivered again).
func TestTargetPartialFailureRetriesOnlyThoseRecords(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be)
		tg := &scriptedTarget{answer: func(call int, d Delivery) error {
			if call == 1 && d.Key == "o-2" {
				return errors.New("consumer failed it")
			}
			return nil
		}}
		p := withTarget(t, b, tg)
		batch := []events.SQSMessage{orderRecord("m1", "o-1"), orderRecord("m2", "o-2"), orderRecord("m3", "o-3")}
		if failed := handleWith(t, p, batch...); !slices.Equal(failed, []string{"m2"}) {
			t.Fatalf("failed %v, want [m2] as the target said", failed)
		}
		// SQS delivers all three again: only o-2 reaches the target.
		if failed := handleWith(t, p, batch...); len(failed) != 0 {
			t.Fatalf("failed %v on redelivery", failed)
		}
		var keys []string
		for _, d := range tg.delivered() {
			keys = append(keys, d.Key)
		}
		if tg.callCount() != 2 || !slices.Equal(keys[3:], []string{"o-2"}) {
			t.Errorf("%d calls delivering %v, want o-2 again, o-1 and o-3 never", tg.callCount(), keys)
		}
	})
}

// A failure of every message releases them all: the next delivery reaches
// the target again at once.
func TestTargetErrorRetriesAll(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be)
		tg := &scriptedTarget{answer: func(call int, _ Delivery) error {
			if call == 1 {
				return errors.New("db down")
			}
			return nil
		}}
		p := withTarget(t, b, tg)
		batch := []events.SQSMessage{orderRecord("m1", "o-1"), orderRecord("m2", "o-2")}
		if failed := handleWith(t, p, batch...); len(failed) != 2 {
			t.Fatalf("failed %v, want both", failed)
		}
		if failed := handleWith(t, p, batch...); len(failed) != 0 {
			t.Fatalf("failed %v after the target recovered", failed)
		}
		if n := tg.callCount(); n != 2 {
			t.Errorf("%d calls, want 2", n)
		}
	})
}

// A delivery whose outcome is unknown may have acted: the records are
// retried but their locks kept, so a redelivery before the lock expires
// does not reach the target a second time; after it, it does. A target
// that answers for fewer messages than it got has confirmed none.
func TestTargetUnknownOutcomeKeepsTheLock(t *testing.T) {
	t.Parallel()
	for _, short := range []bool{false, true} {
		t.Run(fmt.Sprintf("short answer=%v", short), func(t *testing.T) {
			t.Parallel()
			eachBackend(t, func(t *testing.T, be procBackend) {
				b := procSetup(t, be)
				from := b.clock.Now()
				tg := &scriptedTarget{answer: func(call int, _ Delivery) error {
					if call == 1 && !short {
						return fmt.Errorf("%w: connection reset", ErrOutcomeUnknown)
					}
					return nil
				}}
				tg.short = short
				p := withTarget(t, b, tg)
				batch := []events.SQSMessage{orderRecord("m1", "o-1")}
				if failed := handleWith(t, p, batch...); len(failed) != 1 {
					t.Fatalf("failed %v, want m1 retried", failed)
				}
				tg.short = false
				if failed := handleWith(t, p, batch...); len(failed) != 1 {
					t.Fatalf("failed %v, want m1 still waiting for its lock", failed)
				}
				if n := tg.callCount(); n != 1 {
					t.Fatalf("%d deliveries, want 1 while the lock is held", n)
				}
				b.clock.Advance(2 * time.Minute) // past LOCK_TIMEOUT (60 s)
				if failed := handleWith(t, p, batch...); len(failed) != 0 {
					t.Fatalf("failed %v after the lock expired", failed)
				}
				if n := tg.callCount(); n != 2 {
					t.Errorf("%d deliveries, want 2", n)
				}
				if !strings.Contains(b.logs.String(), "delivery-unknown") {
					t.Errorf("no delivery-unknown log line:\n%s", b.logs)
				}
				// Unknown, then held by that lock, then delivered.
				checkProcMetrics(t, b, from, 3, metricCounts{"Failed": 1, "Failed/delivery-unknown": 1, "InProgress": 1, "Processed": 1})
			})
		})
	}
}

// A target that already holds the key's named execution for the same
// payload (a crash between the start and the completion) completes the
// record, counted as AlreadyStarted, and deletes it; a redelivery is then a
// duplicate, never delivered again. One held for another payload is the
// payload-mismatch policy's: forwarded to the operator queue.
func TestTargetAlreadyStartedCompletesTheRecord(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be)
		operator := b.queues.newQueue(t, false, nil)
		b.cfg.OperatorQueueURL = operator
		b.cfg.HashKeys = true
		from := b.clock.Now()
		var seen []Delivery
		tg := &scriptedTarget{answer: func(_ int, d Delivery) error {
			seen = append(seen, d)
			switch d.Key {
			case "o-started":
				return fmt.Errorf("execution %q: %w", d.RecordKey, ErrAlreadyStarted)
			case "o-other":
				return fmt.Errorf("execution %q holds another payload: %w", d.RecordKey, ErrPayloadMismatch)
			}
			return nil
		}}
		p := withTarget(t, b, tg)
		if failed := handleWith(t, p, orderRecord("m1", "o-started"), orderRecord("m2", "o-other"), orderRecord("m3", "o-new")); len(failed) != 0 {
			t.Fatalf("failed %v, want none: already started completes, a mismatch is forwarded", failed)
		}
		for _, d := range seen {
			if d.RecordKey != HashKey(d.Key) || d.PayloadHash != bodyHash(d.Record.Body) {
				t.Errorf("delivery of %q: RecordKey %q PayloadHash %q, want the key's hash and the body's", d.Key, d.RecordKey, d.PayloadHash)
			}
		}
		fwd := b.queues.received(t, operator, 1)
		if len(fwd) != 1 || reasonOf(fwd[0]) != ReasonPayloadMismatch || !strings.Contains(aws.ToString(fwd[0].Body), "o-other") {
			t.Fatalf("operator queue got %v, want o-other with reason %s", fwd, ReasonPayloadMismatch)
		}
		calls := tg.callCount()
		if failed := handleWith(t, p, orderRecord("m4", "o-started")); len(failed) != 0 {
			t.Fatalf("redelivery failed %v", failed)
		}
		if tg.callCount() != calls {
			t.Error("the already started key was delivered again: its completion was not written")
		}
		checkProcMetrics(t, b, from, 2, metricCounts{"AlreadyStarted": 1, "Processed": 1, "Duplicate": 1, "ForwardedToOperator": 1, "ForwardedToOperator/payload-mismatch": 1})
	})
}
