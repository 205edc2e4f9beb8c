package sqsonce

import (
	"context"
	"time"

	"github.com/sqs-once/sqs-once/internal/retrybudget"
)

// budget divides one invocation's time: records run until the reserve
// (retrybudget.Reserve) begins; the batch's last calls (forwards to the
// operator queue, the failure backoff) run in it, and leave its response
// share for the response.
type budget struct {
	deadline time.Time // zero: the context has none
	reserve  time.Duration
}

func newBudget(ctx context.Context, now time.Time) budget {
	deadline, ok := ctx.Deadline()
	if !ok {
		return budget{}
	}
	return budget{deadline: deadline, reserve: retrybudget.Reserve(deadline.Sub(now))}
}

// recordsEnd is when records, and their table calls, must be done.
func (b budget) recordsEnd() time.Time { return b.deadline.Add(-b.reserve) }

// canStart says whether a record may start at now, and how long is left
// before the reserve.
func (b budget) canStart(now time.Time) (time.Duration, bool) {
	if b.deadline.IsZero() {
		return 0, true
	}
	left := b.recordsEnd().Sub(now)
	return left, left > 0
}

// context is the batch's: its records and its last calls end the response
// share of the reserve before the deadline. No record starts inside the
// reserve (canStart), but one that started may finish in it, because its
// completion write is the call that matters most (one that cannot be written
// opens a duplicate window; a late forward or backoff costs only a retry).
func (b budget) context(ctx context.Context) (context.Context, context.CancelFunc) {
	if b.deadline.IsZero() {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, b.deadline.Add(-retrybudget.ResponseShare(b.reserve)))
}
