package sqsonce

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// lostAnswerCase is one protocol call whose answer is lost after the store
// applied it.
type lostAnswerCase struct {
	op    string // "acquire", "complete" or "release"
	fails bool   // the handler fails, so the lock is released
	mode  InProgressPolicy
	fifo  bool
}

func (c lostAnswerCase) String() string {
	return fmt.Sprintf("%s/%s/fifo=%v", c.op, c.mode, c.fifo)
}

// lostAnswerCases are every call of the protocol, in both IN_PROGRESS modes,
// on a standard and a FIFO queue.
func lostAnswerCases() []lostAnswerCase {
	var cases []lostAnswerCase
	for _, call := range []struct {
		op    string
		fails bool
	}{{"acquire", false}, {"complete", false}, {"release", true}} {
		for _, mode := range []InProgressPolicy{InProgressRetry, InProgressDrop} {
			for _, fifo := range []bool{false, true} {
				cases = append(cases, lostAnswerCase{call.op, call.fails, mode, fifo})
			}
		}
	}
	return cases
}

// checkLostAnswer runs a batch through b's processor while lose (armed by
// the caller) loses the answer of c.op once, and checks that the message is
// processed exactly once, in the invocation that met the fault: neither
// lost, nor locked out, nor repeated. pending reports the faults not yet
// met.
func checkLostAnswer(t *testing.T, b *procBundle, c lostAnswerCase, pending func() int) {
	t.Helper()
	var opts []func(*events.SQSMessage)
	if c.fifo {
		opts = append(opts, inGroup("g"))
	}
	msg := procRecord("m-1", "x", opts...)
	if c.fails {
		b.handler.errs["m-1"] = fmt.Errorf("downstream 503")
	}
	resp, err := b.processor.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg, procRecord("m-2", "y", opts...)}})
	if err != nil || pending() != 0 {
		t.Fatalf("Handle: %v; fault pending: %d", err, pending())
	}
	wantFailed := []string{}
	if c.fails {
		wantFailed = append(wantFailed, "m-1")
		if c.fifo {
			wantFailed = append(wantFailed, "m-2") // held back behind m-1, in order
		}
	}
	if got := failedOf(resp); !slices.Equal(got, wantFailed) {
		t.Fatalf("failed %v, want %v", got, wantFailed)
	}
	if c.fails {
		// The lock is gone: the redelivery runs at once.
		delete(b.handler.errs, "m-1")
		if failed := b.handle(t, msg); len(failed) != 0 {
			t.Fatalf("redelivery after the lost release failed %v: the message is locked out", failed)
		}
	}
	// A later copy is a duplicate: the handler ran once per key.
	if failed := b.handle(t, msg); len(failed) != 0 {
		t.Fatalf("duplicate failed %v", failed)
	}
	runs := 0
	for _, id := range b.handler.Calls() {
		if id == "m-1" {
			runs++
		}
	}
	if want := map[bool]int{false: 1, true: 2}[c.fails]; runs != want {
		t.Errorf("handler ran m-1 %d times, want %d", runs, want)
	}
}

// TestLostStoreAnswersNeitherLoseNorLockOutNorRepeat: every call of the
// protocol that the store applied but whose answer was lost, so that the
// client asked again, is recognised as the caller's own
// (TestLostTableAnswersNeitherLoseNorLockOutNorRepeat loses DynamoDB's
// answers on the wire).
func TestLostStoreAnswersNeitherLoseNorLockOutNorRepeat(t *testing.T) {
	t.Parallel()
	for _, c := range lostAnswerCases() {
		t.Run(c.String(), func(t *testing.T) {
			t.Parallel()
			b := procSetup(t, memoryBackend, func(cfg *ConsumerConfig) { cfg.InProgress = c.mode })
			st := b.faults.(*faultStore)
			st.loseAnswer(c.op)
			checkLostAnswer(t, b, c, st.pendingLost)
		})
	}
}
