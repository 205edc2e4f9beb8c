package sqsonce

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestAPanicsErrorIsOneLineWithItsStackApart: the error a panic becomes
// (what Outcome.Err carries, and the log's error field) is one line,
// "panicked: <value>"; the stack is in the PanicError's field of its own.
func TestAPanicsErrorIsOneLineWithItsStackApart(t *testing.T) {
	lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
		res := e.locker(t, e.store).do(context.Background(), "order-p", "", 0, noResult(func(context.Context) error { panic("boom") }))
		if res.outcome != failed {
			t.Fatalf("outcome %v (%v); want failed", res.outcome, res.err)
		}
		if got := res.err.Error(); got != "sqsonce: function panicked: boom" || strings.Contains(got, "\n") {
			t.Errorf("the panic's error reads %q; want one line without the stack", got)
		}
		var p *PanicError
		if !errors.As(res.err, &p) || !strings.Contains(string(p.Stack), "goroutine") {
			t.Errorf("the panic's error %#v carries no stack of its own", res.err)
		}
	})
}
