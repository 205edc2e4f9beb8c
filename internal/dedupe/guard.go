package dedupe

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// Defaults of a Guard whose fields are left zero.
const (
	// DefaultDedupeWindow is how long a completed key suppresses duplicates.
	DefaultDedupeWindow = 24 * time.Hour
	// DeadlineMargin extends a lock past the invocation's deadline, for clock
	// skew between the host that takes the lock and the one that checks it.
	DeadlineMargin = 5 * time.Second
	// NoDeadlineLockTimeout bounds the lock of a context without a deadline:
	// Lambda's longest timeout, so a lock is never open-ended.
	NoDeadlineLockTimeout = 15 * time.Minute
	// MaxCompletionReserve is the most of an invocation's remaining time kept
	// back from the handler for writing its outcome (a tenth of it, at most
	// this).
	MaxCompletionReserve = 2 * time.Second
)

// Outcome says what Guard.Do did with a key.
type Outcome int

const (
	// Processed: fn succeeded and the key is COMPLETED.
	Processed Outcome = iota + 1
	// ProcessedUnrecorded: fn succeeded but the completion could not be
	// written; the lock expires later and a redelivery would run fn again.
	ProcessedUnrecorded
	// Duplicate: the key was already COMPLETED; fn did not run.
	Duplicate
	// PayloadMismatch: the key is held for another payload; fn did not run.
	PayloadMismatch
	// InProgress: another holder has a live lock; fn did not run.
	InProgress
	// Failed: fn returned an error (see Result.Err); the lock was released
	// or, if releasing failed, expires on its own.
	Failed
	// NotAcquired: the store failed or is misconfigured (Result.Err matches
	// ErrUnavailable or ErrMisconfigured), so fn did not run.
	NotAcquired
)

func (o Outcome) String() string {
	switch o {
	case Processed:
		return "processed"
	case ProcessedUnrecorded:
		return "processed-unrecorded"
	case Duplicate:
		return "duplicate"
	case PayloadMismatch:
		return "payload-mismatch"
	case InProgress:
		return "in-progress"
	case Failed:
		return "failed"
	case NotAcquired:
		return "not-acquired"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Result is the outcome of Guard.Do with its detail.
type Result struct {
	Outcome Outcome
	// Err is fn's error for Failed, the store's for NotAcquired and
	// ProcessedUnrecorded, the *HeldError for Duplicate and InProgress.
	Err error
	// ReleaseErr is set when Failed could not release the lock.
	ReleaseErr error
	// TookOver: the lock replaced an expired lock or an ended window.
	TookOver bool
	// Fence is the fencing token of the lock this call took (0 if none).
	Fence int64
	// Cached: Duplicate or PayloadMismatch was answered by the Guard's
	// CompletedCache, without a table call.
	Cached bool
	// LockExpiresAt is when the lock this call took ends (zero if none),
	// as last renewed.
	LockExpiresAt time.Time
	// LockLost: while fn ran, a renewal found the lock taken over, or could
	// not renew it before it expired; fn's context was cancelled with
	// ErrLockLost as its cause.
	LockLost bool
}

// Guard runs functions at most once per key within the dedupe window, as far
// as the lock protocol allows (see the README's "Guarantees" section).
type Guard struct {
	Store *Store
	// LockTimeout, when positive, is the lock's length, and the lock is
	// renewed every third of it while fn runs; otherwise the lock lasts
	// until the context's deadline plus DeadlineMargin and is not renewed.
	LockTimeout time.Duration
	// DedupeWindow is how long a completion suppresses duplicates.
	DedupeWindow time.Duration
	// Now is the clock; tests move it.
	Now func() time.Time
	// Sleep waits between attempts to record a completion; tests make it
	// instant. It must return early with ctx's error when ctx ends.
	Sleep func(ctx context.Context, d time.Duration) error
	// After has the signature of time.After, which nil means; the renewal
	// waits on it, so tests drive renewals with a fake clock.
	After func(d time.Duration) <-chan time.Time
	// Cache, when set, answers repeated duplicates without a table call.
	Cache *CompletedCache
}

// completeAttempts bounds the retries of a completion write that failed for a
// reason other than a lost lock.
const completeAttempts = 4

// Do acquires key, runs fn under the lock and records the outcome. fn runs
// only while this call holds the lock, and never when the store is failing.
// Only fn returning nil counts as success: a panic, or an exit through
// runtime.Goexit, is a failure and releases the lock.
//
// fn's context carries the lease (LeaseFrom): its key and fencing token.
func (g *Guard) Do(ctx context.Context, key string, fn func(context.Context) error) Result {
	return g.DoPayload(ctx, key, "", fn)
}

// DoPayload is Do for a payload whose hash the record keeps: a key held for
// another payload is PayloadMismatch, not Duplicate. "" validates nothing.
func (g *Guard) DoPayload(ctx context.Context, key, payloadHash string, fn func(context.Context) error) Result {
	h, res := g.Acquire(ctx, key, payloadHash)
	if h == nil {
		return res
	}
	return h.Finish(ctx, run(h.Context(), fn))
}

// Hold is a key's lock taken by Acquire, renewed while it is held, until
// Finish records the work's outcome or Abandon leaves the lock to expire.
// It lets work that is not one function call (one delivery for a whole
// batch of keys) run under the same protocol as Do.
type Hold struct {
	g           *Guard
	key         string
	payloadHash string
	ctx         context.Context
	cancel      context.CancelFunc
	lose        context.CancelCauseFunc
	stopRenewal func() (Lease, error)
	ended       bool
}

// Acquire takes key's lock for work done outside Do. When the lock is taken
// it returns a Hold, which must be ended with Finish or Abandon; otherwise it
// returns nil and the final Result (Duplicate, PayloadMismatch, InProgress or
// NotAcquired). ctx is the one the lock is renewed under: it must outlive the
// work.
func (g *Guard) Acquire(ctx context.Context, key, payloadHash string) (*Hold, Result) {
	now := g.now()
	if err := g.Cache.held(key, payloadHash, now); err != nil {
		if errors.Is(err, ErrPayloadMismatch) {
			return nil, Result{Outcome: PayloadMismatch, Err: err, Cached: true}
		}
		return nil, Result{Outcome: Duplicate, Err: err, Cached: true}
	}
	lease, err := g.Store.AcquirePayload(ctx, key, payloadHash, now, g.lockUntil(ctx, now))
	var held *HeldError
	switch {
	case errors.Is(err, ErrPayloadMismatch):
		return nil, Result{Outcome: PayloadMismatch, Err: err}
	case errors.As(err, &held) && held.Status == StatusCompleted:
		g.Cache.add(key, held.Until, held.PayloadHash)
		return nil, Result{Outcome: Duplicate, Err: err}
	case errors.Is(err, ErrInProgress):
		return nil, Result{Outcome: InProgress, Err: err}
	case err != nil:
		return nil, Result{Outcome: NotAcquired, Err: err}
	}
	workCtx, cancel := g.handlerContext(ctx, now)
	workCtx, lose := context.WithCancelCause(workCtx)
	return &Hold{
		g:           g,
		key:         key,
		payloadHash: payloadHash,
		ctx:         context.WithValue(workCtx, leaseKey{}, lease),
		cancel:      cancel,
		lose:        lose,
		stopRenewal: g.renewWhileRunning(ctx, lease, lose),
	}, Result{}
}

// Context is the work's: it carries the lease (LeaseFrom), ends early
// enough to leave time for recording the outcome, and is cancelled with
// ErrLockLost as its cause when the lock is lost.
func (h *Hold) Context() context.Context { return h.ctx }

// Lease is the lock as taken (its fence, key and owner).
func (h *Hold) Lease() Lease {
	l, _ := LeaseFrom(h.ctx)
	return l
}

// end stops the renewal and returns the lease as last renewed.
func (h *Hold) end() (Lease, error) {
	if h.ended {
		panic("dedupe: Hold ended twice")
	}
	h.ended = true
	lease, lostErr := h.stopRenewal()
	h.lose(nil)
	h.cancel()
	return lease, lostErr
}

// Finish records the work's outcome: workErr nil completes the key (the
// outcome is Processed, or ProcessedUnrecorded when the completion could not
// be written), any error releases the lock (Failed). ctx bounds the table
// calls. Call it once.
func (h *Hold) Finish(ctx context.Context, workErr error) Result {
	lease, lostErr := h.end()
	g := h.g
	res := Result{TookOver: lease.TookOver, Fence: lease.Fence, LockExpiresAt: lease.LockExpiresAt, LockLost: lostErr != nil}
	if workErr != nil {
		res.Outcome, res.Err = Failed, workErr
		res.ReleaseErr = g.Store.Release(ctx, lease, g.now())
		return res
	}
	completedAt, err := g.complete(ctx, lease)
	if err != nil {
		res.Outcome, res.Err = ProcessedUnrecorded, err
		return res
	}
	g.Cache.add(h.key, completedAt.Add(g.window()), h.payloadHash)
	res.Outcome = Processed
	return res
}

// Abandon stops renewing the lock and leaves it held until it expires,
// writing nothing: for work whose outcome is unknown (a call that may have
// been applied but did not answer). Releasing would let the next delivery
// run at once, while the first attempt may still be acting; the expiry
// gives it its time. It returns the lease as last renewed. Call it once,
// instead of Finish.
func (h *Hold) Abandon() Lease {
	lease, _ := h.end()
	return lease
}

// run calls fn and reports how it ended. fn runs on a goroutine of its own
// so that runtime.Goexit ends only fn, and is seen: an outcome that defaults
// to success would let such an exit delete the message with the lock held.
func run(ctx context.Context, fn func(context.Context) error) error {
	ended := make(chan error, 1)
	go func() {
		returned := false
		defer func() {
			if returned {
				return
			}
			if p := recover(); p != nil {
				ended <- &PanicError{Value: p, Stack: debug.Stack()}
				return
			}
			ended <- ErrExited
		}()
		err := fn(ctx)
		returned = true
		ended <- err
	}()
	return <-ended
}

type leaseKey struct{}

// LeaseFrom returns the lease of the key a function runs under in Guard.Do.
func LeaseFrom(ctx context.Context) (Lease, bool) {
	l, ok := ctx.Value(leaseKey{}).(Lease)
	return l, ok
}

// renewWhileRunning renews the lease every third of LockTimeout until the
// returned stop is called, which returns the lease as last renewed and, if
// the lock was lost, why. When a renewal is refused because the lock was
// taken over, or the lock reaches its expiry without a renewal getting
// through, lose cancels fn's context with ErrLockLost. A transient failure
// is retried at the next tick, while the lock still runs.
func (g *Guard) renewWhileRunning(ctx context.Context, lease Lease, lose context.CancelCauseFunc) (stop func() (Lease, error)) {
	if g.LockTimeout <= 0 {
		return func() (Lease, error) { return lease, nil }
	}
	renewCtx, cancel := context.WithCancel(ctx)
	finished := make(chan struct{})
	var lost error
	go func() {
		defer close(finished)
		for {
			select {
			case <-renewCtx.Done():
				return
			case <-g.after(g.LockTimeout / 3):
			}
			renewed, err := g.Store.Renew(renewCtx, lease, g.now().Add(g.LockTimeout))
			if renewCtx.Err() != nil {
				return
			}
			switch {
			case err == nil:
				lease = renewed
				continue
			case errors.Is(err, ErrLockLost):
				lost = err
			case !g.now().Before(lease.LockExpiresAt):
				lost = fmt.Errorf("%w: not renewed before it expired at %s: %w", ErrLockLost, lease.LockExpiresAt.UTC().Format(time.RFC3339Nano), err)
			default:
				continue
			}
			lose(lost)
			return
		}
	}()
	return func() (Lease, error) {
		cancel()
		<-finished
		return lease, lost
	}
}

// complete retries a failed completion write within ctx's deadline: fn's side
// effect has happened, and every lost completion opens a duplicate window.
// It returns the time the window was counted from.
func (g *Guard) complete(ctx context.Context, lease Lease) (time.Time, error) {
	delay := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		now := g.now()
		err := g.Store.Complete(ctx, lease, now, g.window())
		if err == nil || errors.Is(err, ErrLockLost) || attempt == completeAttempts {
			return now, err
		}
		if deadline, ok := ctx.Deadline(); ok && g.now().Add(delay).After(deadline) {
			return now, err
		}
		if serr := g.sleep(ctx, delay); serr != nil {
			return now, errors.Join(err, serr)
		}
		delay *= 2
	}
}

// handlerContext keeps back part of the invocation's remaining time from fn,
// so that a handler finishing at its deadline still leaves time to record the
// completion instead of opening a duplicate window.
func (g *Guard) handlerContext(ctx context.Context, now time.Time) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return ctx, func() {}
	}
	reserve := min(MaxCompletionReserve, deadline.Sub(now)/10)
	return context.WithDeadline(ctx, deadline.Add(-reserve))
}

func (g *Guard) lockUntil(ctx context.Context, now time.Time) time.Time {
	if g.LockTimeout > 0 {
		return now.Add(g.LockTimeout)
	}
	if deadline, ok := ctx.Deadline(); ok {
		return deadline.Add(DeadlineMargin)
	}
	return now.Add(NoDeadlineLockTimeout)
}

func (g *Guard) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

func (g *Guard) after(d time.Duration) <-chan time.Time {
	if g.After != nil {
		return g.After(d)
	}
	return time.After(d)
}

func (g *Guard) window() time.Duration {
	if g.DedupeWindow > 0 {
		return g.DedupeWindow
	}
	return DefaultDedupeWindow
}

func (g *Guard) sleep(ctx context.Context, d time.Duration) error {
	if g.Sleep != nil {
		return g.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
