package sqsonce

import (
	"context"
	"time"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// The lock's internals, exported to the lock tests of package sqsonce_test
// (lock_*_test.go), which run the locker on the in-memory store and assert
// what it reports beyond Do's error: the outcome, the fence, a takeover, a
// cached answer, a failed release, a lost lock. memstore no longer imports
// sqsonce; what keeps these tests external is that they share their
// helpers with the tests that drive sqsonce/targets' targets through a
// Processor, and an internal test cannot import sqsonce/targets (it imports
// sqsonce).

// LockOutcome is what the lock did with a key.
type LockOutcome = lockOutcome

// The outcomes.
const (
	LockProcessed           = processed
	LockProcessedUnrecorded = processedUnrecorded
	LockDuplicate           = duplicate
	LockPayloadMismatch     = payloadMismatch
	LockInProgress          = inProgress
	LockFailed              = failed
	LockNotAcquired         = notAcquired
)

// The lock's margins.
const (
	LockDeadlineMargin       = deadlineMargin
	LockNoDeadline           = noDeadlineLock
	LockMaxCompletionReserve = maxCompletionReserve
)

// LockResult is a lockResult with its fields exported.
type LockResult struct {
	Outcome       LockOutcome
	Err           error
	ReleaseErr    error
	TookOver      bool
	Fence         int64
	Cached        bool
	LockExpiresAt time.Time
	LockLost      bool
	Result        []byte
	Waited        time.Duration
}

func exportResult(r lockResult) LockResult {
	return LockResult{
		Outcome: r.outcome, Err: r.err, ReleaseErr: r.releaseErr, TookOver: r.tookOver, Fence: r.fence,
		Cached: r.cached, LockExpiresAt: r.lockExpiresAt, LockLost: r.lockLost,
		Result: r.result, Waited: r.waited,
	}
}

// Locker is the locker of a Processor.
type Locker struct{ g *locker }

// NewLocker builds the locker New builds for cfg (through the same
// constructor), with the renewal's timer and the completion's sleep the
// test's (nil: the real ones).
func NewLocker(cfg Config, after func(time.Duration) <-chan time.Time, sleep func(context.Context, time.Duration) error) (*Locker, error) {
	p, err := newProcessor(cfg, nil, deps{after: after, sleep: sleep})
	if err != nil {
		return nil, err
	}
	return &Locker{g: p.lock}, nil
}

// Do runs fn under key's lock, validating no payload.
func (l *Locker) Do(ctx context.Context, key string, fn func(context.Context) error) LockResult {
	return exportResult(l.g.do(ctx, key, "", 0, noResult(fn)))
}

// DoResult runs fn under key's lock, storing its result; wait is
// WaitInProgress.
func (l *Locker) DoResult(ctx context.Context, key string, wait time.Duration, fn func(context.Context) ([]byte, error)) LockResult {
	return exportResult(l.g.do(ctx, key, "", wait, fn))
}

func noResult(fn func(context.Context) error) func(context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) { return nil, fn(ctx) }
}

// WaitInterval and WaitReads are the wait's pure functions.
var (
	WaitInterval = waitInterval
	WaitReads    = waitReads
)

// DoPayload runs fn under key's lock for payloadHash.
func (l *Locker) DoPayload(ctx context.Context, key, payloadHash string, fn func(context.Context) error) LockResult {
	return exportResult(l.g.do(ctx, key, payloadHash, 0, noResult(fn)))
}

// LockHold is a hold: a lock taken by Acquire, ended by Finish or Abandon.
type LockHold struct{ h *hold }

// Acquire takes key's lock: a hold, or nil and the final result.
func (l *Locker) Acquire(ctx context.Context, key, payloadHash string) (*LockHold, LockResult) {
	h, res := l.g.acquire(ctx, key, payloadHash)
	if h == nil {
		return nil, exportResult(res)
	}
	return &LockHold{h: h}, exportResult(res)
}

// Context is the work's context.
func (h *LockHold) Context() context.Context { return h.h.ctx }

// Lease is the hold's lease as acquired.
func (h *LockHold) Lease() store.Lease { return h.h.lease }

// Finish records the work's outcome.
func (h *LockHold) Finish(ctx context.Context, workErr error) LockResult {
	return exportResult(h.h.finish(ctx, nil, workErr))
}

// Abandon leaves the lock to expire.
func (h *LockHold) Abandon() store.Lease { return h.h.abandon() }
