package sqsonce

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/sqs-once/sqs-once/internal/jitter"
	"github.com/sqs-once/sqs-once/internal/leasectx"
	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// Defaults and margins of the lock.
const (
	// defaultDedupeWindow is how long a completed key suppresses duplicates
	// when Config.DedupeWindow is zero.
	defaultDedupeWindow = 24 * time.Hour
	// deadlineMargin extends a lock past the invocation's deadline, for clock
	// skew between the host that takes the lock and the one that checks it.
	deadlineMargin = 5 * time.Second
	// noDeadlineLock is the lock under a context without a deadline and a
	// zero LockTimeout (a job, a server's request): short, and renewed every
	// third of it while fn runs, so that a process killed inside fn frees
	// its key within this time, and a slow fn keeps it as long as it runs.
	noDeadlineLock = 30 * time.Second
	// maxCompletionReserve is the most of an invocation's remaining time kept
	// back from the handler for writing its outcome (a tenth of it, at most
	// this).
	maxCompletionReserve = 2 * time.Second
)

// lockOutcome says what the lock did with a key.
type lockOutcome int

const (
	// processed: fn succeeded and the key is COMPLETED.
	processed lockOutcome = iota + 1
	// processedUnrecorded: fn succeeded but the completion could not be
	// written; the lock expires later and a redelivery would run fn again.
	processedUnrecorded
	// duplicate: the key was already COMPLETED; fn did not run.
	duplicate
	// payloadMismatch: the key is held for another payload; fn did not run.
	payloadMismatch
	// inProgress: another holder has a live lock; fn did not run.
	inProgress
	// failed: fn returned an error (see lockResult.err); the lock was
	// released or, if releasing failed, expires on its own.
	failed
	// notAcquired: the store failed or is misconfigured (err matches
	// ErrUnavailable or ErrMisconfigured), so fn did not run.
	notAcquired
	// emitPending: the key is COMPLETED (fn succeeded now, or a duplicate
	// found the completion) and its emitted messages are not all sent: the
	// record is retried, and the retry sends them (relay).
	emitPending
	// uncommitted: fn succeeded, but the transaction of its writes and its
	// completion did not commit (store.Transactor): its effect is not
	// applied, or, when the store's answer never came, the record settles
	// it for the next delivery. The lock was released when nothing was
	// applied, and is otherwise left to expire. Also a plain completion
	// that carries emitted messages and whose outcome is unknown (left to
	// expire): its messages must be relayed or staged again, never
	// dropped with the delivery.
	uncommitted
)

func (o lockOutcome) String() string {
	switch o {
	case processed:
		return "processed"
	case processedUnrecorded:
		return "processed-unrecorded"
	case duplicate:
		return "duplicate"
	case payloadMismatch:
		return "payload-mismatch"
	case inProgress:
		return "in-progress"
	case failed:
		return "failed"
	case notAcquired:
		return "not-acquired"
	case uncommitted:
		return "uncommitted"
	case emitPending:
		return "emit-pending"
	}
	return fmt.Sprintf("lockOutcome(%d)", int(o))
}

// lockResult is what the lock did, with its detail.
type lockResult struct {
	outcome lockOutcome
	// err is fn's error for failed, the store's for notAcquired and
	// processedUnrecorded, the refusal for duplicate, inProgress and
	// payloadMismatch.
	err error
	// releaseErr is set when failed could not release the lock, or when
	// notAcquired could not release the lock its acquire may have taken
	// (releaseGivenUp).
	releaseErr error
	// tookOver: the lock replaced an expired lock or an ended window.
	tookOver bool
	// fence is the fencing token of the lock this call took (0 if none).
	fence int64
	// cached: duplicate or payloadMismatch was answered by the local
	// cache, without a store call.
	cached bool
	// lockExpiresAt is when the lock this call took ends (zero if none),
	// as last renewed.
	lockExpiresAt time.Time
	// lockLost: while fn ran, a renewal found the lock taken over, or could
	// not renew it before it expired; fn's context was cancelled with
	// ErrLockLost as its cause.
	lockLost bool
	// result is the stored result of a duplicate (nil: none stored).
	result []byte
	// waited is how long the call waited for another holder (WaitInProgress).
	waited time.Duration
	// resultDropped: fn's result was not stored, since with its emitted
	// messages it would not fit the record (store.MaxResultSize).
	resultDropped int
	// emitted is how many messages were sent (by fn's holder, or a
	// duplicate's relay).
	emitted int
}

// locker runs functions at most once per key within the dedupe window, as
// far as the lock protocol allows (docs: the guarantees).
type locker struct {
	store  store.Store
	prefix string
	// hashKeys: record ids hold the SHA-256 of the key (Config.HashKeys).
	hashKeys bool
	// lockTimeout, when positive, is the lock's length, and the lock is
	// renewed every third of it while fn runs; otherwise the lock lasts
	// until the context's deadline plus deadlineMargin and is not renewed,
	// or, without a deadline, noDeadlineLock, renewed.
	lockTimeout time.Duration
	window      time.Duration
	now         func() time.Time
	// sleep waits between attempts to record a completion. It must return
	// early with ctx's error when ctx ends.
	sleep func(ctx context.Context, d time.Duration) error
	// after has the signature of time.After; the renewal waits on it, so
	// tests drive renewals with a fake clock.
	after func(d time.Duration) <-chan time.Time
	// cache, when set, answers repeated duplicates without a store call.
	cache *completedCache
	// newOwner makes the token that identifies one acquisition.
	newOwner func() string
	// rand returns uniform values in [0, 1): the jitter of a wait.
	rand func() float64
	// sender sends emitted messages (Config.Sender), nil: Emit refuses.
	sender Sender
	// permanentEffect, when set, marks a transaction refused by a
	// condition of the work's own writes Permanent (Config.PermanentEffect).
	permanentEffect func(*store.EffectError) bool
}

// recordID is key's record id.
func (g *locker) recordID(key string) string {
	if g.hashKeys {
		return store.RecordID(g.prefix, HashKey(key))
	}
	return store.RecordID(g.prefix, key)
}

// shownKey is the key as logs, metrics and outcomes show it: its hash when
// keys are hashed.
func (g *locker) shownKey(key string) string {
	if g.hashKeys {
		return HashKey(key)
	}
	return key
}

// completeAttempts bounds the retries of a completion write that failed for
// a reason other than a lost lock.
const completeAttempts = 4

// completeDelay is the pause before the retry that follows the attempt'th
// completion write (1 first): 50 ms doubling, 50, 100 and 200 ms within
// completeAttempts. No jitter: the retries are one caller's, against its
// own deadline, and nobody else retries in step with them.
func completeDelay(attempt int) time.Duration {
	return jitter.Policy{Base: 50 * time.Millisecond, Rate: 2, Cap: time.Second, Strategy: jitter.None}.Delay(attempt-1, 0)
}

// do acquires key, runs fn under the lock and records the outcome, with
// the result fn returns (nil: none). fn runs only while this call holds
// the lock, and never when the store is failing. Only fn returning a nil
// error counts as success: a panic, or an exit through runtime.Goexit, is a
// failure and releases the lock. A key held for another payloadHash (""
// validates nothing) is payloadMismatch, not duplicate. fn's context
// carries the key and fencing token (Key, Fence). With wait > 0, a refusal
// by another live holder is waited out (waitOut) for at most wait.
func (g *locker) do(ctx context.Context, key, payloadHash string, wait time.Duration, fn func(context.Context) ([]byte, error)) lockResult {
	h, res := g.acquire(ctx, key, payloadHash)
	if h == nil && res.outcome == inProgress && wait > 0 {
		h, res = g.waitOut(ctx, key, payloadHash, wait, res)
	}
	if h == nil {
		return res
	}
	var result []byte
	err := run(h.ctx, func(ctx context.Context) error {
		var err error
		result, err = fn(ctx)
		return err
	})
	out := h.finish(ctx, result, err)
	out.waited = res.waited
	return out
}

// Waiting for another holder: the first interval, and the longest.
const (
	waitFirst = 50 * time.Millisecond
	waitMax   = time.Second
)

// waitInterval is the wait before the attempt'th re-read (0 first): it
// doubles from waitFirst up to waitMax, and r in [0, 1) takes up to half of
// it off (jitter.HalfOff), so that waiters spread out while every interval
// is at least half its step (which bounds the reads of a wait: see
// waitReads).
func waitInterval(attempt int, r float64) time.Duration {
	return jitter.Policy{Base: waitFirst, Rate: 2, Cap: waitMax, Strategy: jitter.HalfOff}.Delay(attempt, r)
}

// waitReads is the most reads a wait of d makes: one after each of the
// shortest intervals that fit in d, and one at its end.
func waitReads(d time.Duration) int {
	n := 0
	for elapsed := time.Duration(0); ; n++ {
		elapsed += waitInterval(n, 1)
		if elapsed > d {
			return n + 1
		}
	}
}

// waitOut waits, for at most wait and within ctx, for the live holder that
// refused key (refused, an inProgress result) to finish: it re-reads the
// record at growing, jittered intervals (waitInterval). A completion is
// returned as a duplicate, with its stored result; a record that no longer
// blocks (released, expired, gone) is acquired, and a hold returned for fn
// to run. When the wait ends first, the last refusal is returned.
func (g *locker) waitOut(ctx context.Context, key, payloadHash string, wait time.Duration, refused lockResult) (*hold, lockResult) {
	start := g.now()
	end := start.Add(wait)
	id := g.recordID(key)
	res := refused
	for attempt := 0; ; attempt++ {
		d := waitInterval(attempt, g.rand())
		if left := end.Sub(g.now()); d > left {
			d = left
		}
		if d <= 0 {
			res.waited = g.now().Sub(start)
			return nil, res
		}
		if err := g.sleep(ctx, d); err != nil || ctx.Err() != nil {
			res.waited = g.now().Sub(start)
			return nil, res
		}
		now := g.now()
		rec, err := g.store.Read(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound), err == nil && !rec.Blocks(now):
			h, next := g.acquire(ctx, key, payloadHash)
			next.waited = g.now().Sub(start)
			if h != nil || next.outcome != inProgress {
				return h, next
			}
			res = next
		case err != nil:
			return nil, lockResult{outcome: notAcquired, err: storeErr("read", id, err), waited: g.now().Sub(start)}
		case rec.Status == store.StatusCompleted:
			if stored := rec.PayloadHash; payloadHash != "" && stored != "" && stored != payloadHash {
				return nil, lockResult{outcome: payloadMismatch, err: &payloadMismatchError{ID: id, Status: rec.Status}, waited: g.now().Sub(start)}
			}
			res := g.duplicate(ctx, rec, &store.HeldError{Record: rec})
			res.waited = g.now().Sub(start)
			return nil, res
		default:
			res.err = &store.HeldError{Record: rec}
		}
	}
}

// duplicate is the answer to a key found COMPLETED (rec, refused with
// err): a duplicate, once the completion's pending messages, if any, are
// sent (relay: the redelivery is the relay); emitPending when they could
// not all be. Only a completion with nothing pending is cached: a cached
// answer makes no store call, and would never send them.
func (g *locker) duplicate(ctx context.Context, rec store.Record, err error) lockResult {
	if rec.Outbox != nil {
		msgs := countOutbox(rec.Outbox)
		if rerr := g.relay(ctx, rec); rerr != nil {
			return lockResult{outcome: emitPending, err: rerr, fence: rec.Fence}
		}
		rec.Outbox = nil
		g.cache.add(rec.ID, rec.ExpiresAt, rec.PayloadHash, rec.Result)
		return lockResult{outcome: duplicate, err: err, result: rec.Result, emitted: msgs}
	}
	g.cache.add(rec.ID, rec.ExpiresAt, rec.PayloadHash, rec.Result)
	return lockResult{outcome: duplicate, err: err, result: rec.Result}
}

// hold is a key's lock taken by acquire, renewed while it is held, until
// finish records the work's outcome or abandon leaves the lock to expire.
// It lets work that is not one function call (one delivery for a whole
// batch of keys) run under the same protocol as do.
type hold struct {
	g           *locker
	key         string
	payloadHash string
	// ctx is the work's: it carries the key and fence, ends early enough to
	// leave time for recording the outcome, and is cancelled with
	// ErrLockLost as its cause when the lock is lost.
	ctx         context.Context
	lease       store.Lease
	cancel      context.CancelFunc
	lose        context.CancelCauseFunc
	stopRenewal func() (store.Lease, error)
	ended       bool
	// tx is the transaction fn's writes commit in with the completion, on
	// a store.Transactor (nil on another store).
	tx store.Tx
	// outbox is fn's emitted messages (Emit), committed with the
	// completion.
	outbox outbox
}

// acquire takes key's lock. When the lock is taken it returns a hold, which
// must be ended with finish or abandon; otherwise nil and the final result
// (duplicate, payloadMismatch, inProgress or notAcquired). ctx is the one
// the lock is renewed under: it must outlive the work.
func (g *locker) acquire(ctx context.Context, key, payloadHash string) (*hold, lockResult) {
	now := g.now()
	id := g.recordID(key)
	if result, err := g.cache.held(id, payloadHash, now); err != nil {
		if errors.Is(err, ErrPayloadMismatch) {
			return nil, lockResult{outcome: payloadMismatch, err: err, cached: true}
		}
		return nil, lockResult{outcome: duplicate, err: err, cached: true, result: result}
	}
	length, renew := g.lockLength(ctx, now)
	owner := g.newOwner()
	lease, err := g.store.Acquire(ctx, store.AcquireRequest{ID: id, Owner: owner, PayloadHash: payloadHash, Now: now, LockUntil: now.Add(length)})
	var held *store.HeldError
	switch {
	case errors.As(err, &held):
		if stored := held.Record.PayloadHash; payloadHash != "" && stored != "" && stored != payloadHash {
			return nil, lockResult{outcome: payloadMismatch, err: &payloadMismatchError{ID: id, Status: held.Record.Status}}
		}
		if held.Record.Status == store.StatusCompleted {
			return nil, g.duplicate(ctx, held.Record, err)
		}
		return nil, lockResult{outcome: inProgress, err: err}
	case err != nil:
		return nil, lockResult{outcome: notAcquired, err: storeErr("acquire", id, err), releaseErr: g.releaseGivenUp(ctx, id, owner, err)}
	}
	workCtx, cancel := g.handlerContext(ctx, now)
	workCtx, lose := context.WithCancelCause(workCtx)
	var tx store.Tx
	if t, ok := g.store.(store.Transactor); ok {
		// No call to the store: a transaction fn adds nothing to costs
		// nothing, and its completion is Store.Complete.
		tx = t.Begin(lease)
	}
	// The work's context carries its own lock's transaction, or none: a Do
	// nested in another's work must not inherit the outer transaction,
	// whose rollback (the outer work failing) would drop the inner work's
	// writes after the inner key was completed. Masked only where there is
	// one to mask: a context value costs an allocation per lock.
	if tx != nil || store.TxFrom(workCtx) != nil {
		workCtx = store.ContextWithTx(workCtx, tx)
	}
	h := &hold{
		g:           g,
		key:         key,
		payloadHash: payloadHash,
		lease:       lease,
		cancel:      cancel,
		lose:        lose,
		stopRenewal: g.renewWhileRunning(ctx, lease, length, renew, lose),
		tx:          tx,
		outbox:      outbox{noSender: g.sender == nil},
	}
	// The same for the outbox: the work's Emit stages in its own lock's,
	// never an outer Do's.
	h.ctx = leasectx.With(workCtx, leasectx.Lease{Key: key, Fence: lease.Fence, Outbox: &h.outbox})
	return h, lockResult{}
}

// giveUpRelease bounds the release that follows an acquire given up on
// (releaseGivenUp): a store that just failed gets one short try, so that
// the record's outcome is not held back for long.
const giveUpRelease = time.Second

// releaseGivenUp makes sure an acquire of id that ended in acquireErr, a
// store error, leaves no lock of owner's behind. The store may have applied
// the acquire and lost its answer (the SDK's retries then ran out): the
// lock would stay PROCESSING under this call's owner until it expired, and
// the key's next copies would meet it as in progress and could reach the
// dead-letter queue. One owner-conditional release, within ctx and at most
// giveUpRelease, frees it. It is safe whatever the acquire did: every
// store's Release changes only a PROCESSING record of the same owner (an
// owner token is this call's alone, and the condition compares no fence,
// so the lease's unknown fence, 0, is never compared), and succeeds without
// a write on a record that is gone or already released by owner; a record
// another holder has is refused (ErrLockLost) and left as it is. A
// misconfigured store applied nothing and would fail again: no call. The
// release's own failure is returned (nil when it is a refusal: the record
// is not ours, so nothing of ours is left); the lock then expires on its
// own.
func (g *locker) releaseGivenUp(ctx context.Context, id, owner string, acquireErr error) error {
	if errors.Is(acquireErr, ErrMisconfigured) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, giveUpRelease)
	defer cancel()
	err := g.store.Release(ctx, store.Lease{ID: id, Owner: owner}, g.now())
	if err == nil || errors.Is(err, ErrLockLost) {
		return nil
	}
	return err
}

// end stops the renewal and returns the lease as last renewed.
func (h *hold) end() (store.Lease, error) {
	if h.ended {
		panic("sqsonce: hold ended twice")
	}
	h.ended = true
	lease, lostErr := h.stopRenewal()
	h.lose(nil)
	h.cancel()
	return lease, lostErr
}

// finish records the work's outcome: workErr nil completes the key with
// result (the outcome is processed, or processedUnrecorded when the
// completion could not be written), any error releases the lock (failed).
// When the work added writes to its transaction, they commit with the
// completion instead (finishTx). ctx bounds the store calls. Call it once.
func (h *hold) finish(ctx context.Context, result []byte, workErr error) lockResult {
	lease, lostErr := h.end()
	h.seal()
	msgs := h.outbox.seal()
	g := h.g
	res := lockResult{tookOver: lease.TookOver, fence: lease.Fence, lockExpiresAt: lease.LockExpiresAt, lockLost: lostErr != nil}
	if workErr != nil {
		res.outcome, res.err = failed, workErr
		if h.tx != nil && !h.tx.Empty() {
			// The writes are discarded before the lock is given up: the
			// next holder must not find them pending.
			if err := h.tx.Rollback(ctx); err != nil {
				res.releaseErr = err
			}
		}
		if err := g.store.Release(ctx, lease, g.now()); err != nil {
			res.releaseErr = errors.Join(res.releaseErr, err)
		}
		return res
	}
	ob, err := encodeOutbox(msgs)
	if err != nil {
		// Emit checked every message: only a bug gets here.
		res.outcome, res.err = failed, fmt.Errorf("sqsonce: encoding the emitted messages: %w", err)
		res.releaseErr = g.store.Release(ctx, lease, g.now())
		return res
	}
	if len(result)+len(ob) > store.MaxResultSize {
		// The messages are the effect; the result only an answer.
		res.resultDropped = len(result)
		result = nil
	}
	c := store.Completion{Result: result, Outbox: ob}
	if h.tx != nil && !h.tx.Empty() {
		return h.finishTx(ctx, lease, c, res)
	}
	until, err := g.complete(ctx, lease, c)
	switch {
	case err != nil && c.Outbox != nil && !errors.Is(err, ErrLockLost):
		// The completion carries the work's emitted messages and may yet
		// be written. Deleting the message would leave them unsent for
		// good if it was (nobody would relay them), and lost if it was not
		// (the work would not run again). The lock is left to expire, as
		// for a transaction's unknown commit: the next delivery finds the
		// completion and relays its messages, or takes the key over and
		// runs the work again. A refusal (the lock lost) wrote nothing:
		// the holder that took the key over stages its own.
		res.outcome, res.err = uncommitted, err
		return res
	case err != nil:
		res.outcome, res.err = processedUnrecorded, err
		return res
	}
	c.Until = until
	return h.completed(ctx, lease, c, res)
}

// completed is the outcome of a work whose completion c is written:
// processed, once its emitted messages are sent and marked sent (relay);
// emitPending when they could not all be, the record left for the next
// delivery to send them.
func (h *hold) completed(ctx context.Context, lease store.Lease, c store.Completion, res lockResult) lockResult {
	g := h.g
	if c.Outbox != nil {
		rec := store.Record{ID: lease.ID, Status: store.StatusCompleted, Owner: lease.Owner, Fence: lease.Fence, Outbox: c.Outbox}
		if err := g.relay(ctx, rec); err != nil {
			res.outcome, res.err = emitPending, err
			return res
		}
		res.emitted = countOutbox(c.Outbox)
	}
	g.cache.add(lease.ID, c.Until, h.payloadHash, c.Result)
	res.outcome = processed
	return res
}

// finishTx commits the work's transaction with its completion
// (store.Tx.Commit), retried within ctx as complete retries a completion:
// processed when both committed; otherwise nothing of the effect is
// applied, or (the outcome unknown) the record settles it: failed with the
// lock lost when another holder took the key over, failed and released
// when a condition of the work's own writes refused the transaction (an
// *store.EffectError, the work's failure), uncommitted (released when
// nothing was applied, else left to expire) when the store did not commit.
// Never processedUnrecorded: an effect whose completion is not recorded is
// not applied either.
func (h *hold) finishTx(ctx context.Context, lease store.Lease, c store.Completion, res lockResult) lockResult {
	g := h.g
	until, err := g.commit(ctx, h.tx, c)
	var refused *store.EffectError
	switch {
	case err == nil:
		c.Until = until
		return h.completed(ctx, lease, c, res)
	case errors.Is(err, ErrLockLost):
		res.outcome, res.err, res.lockLost = failed, err, true
	case errors.As(err, &refused):
		res.outcome, res.err = failed, err
		if g.permanentEffect != nil && g.permanentEffect(refused) {
			res.err = Permanent(err)
		}
		res.releaseErr = g.store.Release(ctx, lease, g.now())
	case errors.Is(err, store.ErrNotCommitted):
		res.outcome, res.err = uncommitted, storeErr("commit", lease.ID, err)
		res.releaseErr = g.store.Release(ctx, lease, g.now())
	default:
		// Unknown: releasing would let the next delivery run the work
		// while this commit may yet be applied. The lock's expiry, then a
		// takeover with a higher fence, settles it: a commit applied makes
		// the record COMPLETED (a duplicate), one not applied can no longer
		// pass its record's condition.
		res.outcome, res.err = uncommitted, storeErr("commit", lease.ID, err)
	}
	return res
}

// abandon stops renewing the lock and leaves it held until it expires,
// writing nothing: for work whose outcome is unknown (a call that may have
// been applied but did not answer). Releasing would let the next delivery
// run at once, while the first attempt may still be acting; the expiry
// gives it its time. It returns the lease as last renewed. Call it once,
// instead of finish.
func (h *hold) abandon() store.Lease {
	lease, _ := h.end()
	h.seal()
	h.outbox.seal()
	if h.tx != nil && !h.tx.Empty() {
		_ = h.tx.Rollback(context.Background()) // nothing to report it to: the lock expires either way
	}
	return lease
}

// seal closes the work's transaction to writes: the work has returned,
// and a write a goroutine of it adds from now on is refused
// (store.ErrTxEnded) instead of being dropped, or taken after Empty said
// there was nothing to commit.
func (h *hold) seal() {
	if h.tx != nil {
		h.tx.Seal()
	}
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

// renewWhileRunning renews the lease (when renew is set) to length from
// now, every third of length, until the returned stop is called, which returns the lease as last renewed and, if
// the lock was lost, why. When a renewal is refused because the lock was
// taken over, or the lock reaches its expiry without a renewal getting
// through, lose cancels fn's context with ErrLockLost. A transient failure
// is retried at the next tick, while the lock still runs.
func (g *locker) renewWhileRunning(ctx context.Context, lease store.Lease, length time.Duration, renew bool, lose context.CancelCauseFunc) (stop func() (store.Lease, error)) {
	if !renew {
		return func() (store.Lease, error) { return lease, nil }
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
			case <-g.after(length / 3):
			}
			renewed, err := g.store.Renew(renewCtx, lease, g.now().Add(length))
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
	return func() (store.Lease, error) {
		cancel()
		<-finished
		return lease, lost
	}
}

// complete retries a failed completion write within ctx's deadline: fn's
// side effect has happened, and every lost completion opens a duplicate
// window. It returns the end of the window it wrote.
func (g *locker) complete(ctx context.Context, lease store.Lease, c store.Completion) (time.Time, error) {
	err := g.retry(ctx, func() error {
		c.Until = g.now().Add(g.window)
		return g.store.Complete(ctx, lease, c)
	}, func(err error) bool { return errors.Is(err, ErrLockLost) })
	return c.Until, err
}

// commit is complete for a transaction: tx.Commit retried within ctx's
// deadline while its outcome is unknown (store.Tx says a repeat settles
// it), with one window end for every attempt, so that each repeats the
// first exactly.
func (g *locker) commit(ctx context.Context, tx store.Tx, c store.Completion) (time.Time, error) {
	c.Until = g.now().Add(g.window)
	until := c.Until
	err := g.retry(ctx, func() error { return tx.Commit(ctx, c) }, func(err error) bool {
		var refused *store.EffectError
		return errors.Is(err, ErrLockLost) || errors.Is(err, store.ErrNotCommitted) || errors.As(err, &refused)
	})
	return until, err
}

// retry calls write up to completeAttempts times, pausing completeDelay
// between attempts, until it succeeds, fails for good (final), or the next
// pause would pass ctx's deadline.
func (g *locker) retry(ctx context.Context, write func() error, final func(error) bool) error {
	for attempt := 1; ; attempt++ {
		err := write()
		if err == nil || final(err) || attempt == completeAttempts {
			return err
		}
		delay := completeDelay(attempt)
		if deadline, ok := ctx.Deadline(); ok && g.now().Add(delay).After(deadline) {
			return err
		}
		if serr := g.sleep(ctx, delay); serr != nil {
			return errors.Join(err, serr)
		}
	}
}

// handlerContext keeps back part of the invocation's remaining time from
// fn, so that a handler finishing at its deadline still leaves time to
// record the completion instead of opening a duplicate window.
func (g *locker) handlerContext(ctx context.Context, now time.Time) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	reserve := min(maxCompletionReserve, deadline.Sub(now)/10)
	return context.WithDeadline(ctx, deadline.Add(-reserve))
}

// lockLength is how long a lock taken at now lasts, and whether it is
// renewed while its work runs: LockTimeout, renewed; or until ctx's
// deadline plus deadlineMargin, not renewed (the invocation cannot outlive
// it); or, without a deadline, noDeadlineLock, renewed.
func (g *locker) lockLength(ctx context.Context, now time.Time) (length time.Duration, renew bool) {
	if g.lockTimeout > 0 {
		return g.lockTimeout, true
	}
	if deadline, ok := ctx.Deadline(); ok {
		return deadline.Add(deadlineMargin).Sub(now), false
	}
	return noDeadlineLock, true
}

// storeErr is a store's failure as the lock reports it: a store of a
// user's own that returns its own errors is wrapped in a *StoreError, which
// matches ErrUnavailable (nothing was done, and a retry is the safe
// reading).
func storeErr(op, id string, err error) error {
	if !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrMisconfigured) {
		return &store.StoreError{Op: op, ID: id, Err: err}
	}
	return err
}

func randomOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}
