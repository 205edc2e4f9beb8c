package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// TestStore is the conformance suite every store.Store must pass: the
// rules of store.Store's documentation that the lock protocol relies on
// (and that its Promela model checks), one subtest per rule, so that a
// failure names the rule a store breaks. A store of your own proves itself
// with it, from a test in its own package:
//
//	func TestMyStore(t *testing.T) {
//		storetest.TestStore(t, func(t *testing.T) store.Store {
//			return mystore.New(...) // a fresh store, or one on a shared table
//		})
//	}
//
// newStore is called once per rule, from subtests that run in parallel. It
// may return a store on a table the rules share (and other tests use): every
// rule writes only records of its own, with ids "conf#<rule>-<name>-<random>",
// and none reads or scans anything else. The suite never sleeps: it passes
// each call's clock (AcquireRequest.Now, a lock's expiry, a window's end)
// explicitly, from a base time taken when the rule starts (the real clock,
// to the millisecond). Every record's TTL (ExpiresAt) falls at least a
// minute after that base, so a table whose TTL deletes expired items does
// not disturb a rule that runs in less.
//
// The rules of store.Admin run where the store implements it; on one that
// does not, they are skipped, saying so.
//
// The rules (subtests):
//
//   - AcquireNew: Acquire on no record takes the lock: fence
//     FenceSeed(Now)+1, TookOver false; the record reads back PROCESSING with
//     the owner, the fence, the lock's expiry (to the millisecond) and the
//     payload hash, and is kept at least FenceRetention past the lock.
//   - OneLiveHolder: while a lock is live (up to and including its expiry),
//     another owner's Acquire returns a *store.HeldError matching
//     ErrInProgress that carries the record, and changes nothing.
//   - ConcurrentAcquire: of owners racing to acquire one key (absent, or
//     held by an expired lock), exactly one wins.
//   - TakeoverAfterExpiry: once the lock has expired, another owner takes
//     it over: TookOver, the fence one more.
//   - OwnAcquireRetry: a repeated Acquire of the same owner while its lock is
//     live (a retry of a call whose answer was lost) returns the lease, the
//     fence not moved again.
//   - Renew: owner-conditional; moves the expiry; a repeat succeeds; another
//     owner, a lock taken over, a completed, released or absent record is
//     ErrLockLost, and nothing changes.
//   - Complete: owner-conditional; COMPLETED with ExpiresAt until.Unix(); a
//     repeat succeeds; after a takeover it is ErrLockLost and the new
//     holder's record is untouched.
//   - DedupeWindow: within the window (its last second included) Acquire
//     returns a *store.HeldError matching ErrDuplicate carrying ExpiresAt;
//     after it, Acquire takes the record over with the next fence.
//   - Release: owner-conditional; RELEASED, owner and fence kept; a repeat,
//     and an absent record, succeed; another owner, a lock taken over or a
//     completed record is ErrLockLost; Acquire after it succeeds at once
//     (before the old expiry), fence one more, TookOver false.
//   - OperatorRelease: Release with a Lease built from a Read record (ID,
//     Owner, Fence, as the sqs-once CLI builds it) frees a live lock.
//   - GiveUpRelease: Release with a Lease of only ID and Owner (Fence 0,
//     no expiry: what the lock releases after an Acquire that ended in a
//     store error, whose answer may have been lost) frees that owner's live
//     lock; while another owner holds the record it is ErrLockLost and
//     changes nothing.
//   - FenceGrows: the fence grows on every acquisition: after an expired
//     lock, after a window ended, after a release, and after the record was
//     deleted (Forget, where the store implements store.Admin; acquired
//     again FenceRetention later).
//   - Payload: Acquire stores the payload hash without comparing it; the
//     HeldError's record carries it, for a lock and for a completion; a
//     takeover replaces it, with "" too.
//   - Read: ErrNotFound for no record; every write reads back at once.
//   - Forget (store.Admin): deletes the COMPLETED record of the same owner;
//     a record that is now a lock, released, or another owner's is
//     ErrRecordChanged and stays; a record already gone is a success.
//   - Locks (store.Admin): lists the PROCESSING records under a prefix,
//     live or expired, the earliest expiry first, and no other record:
//     not a completion, a released lock, or a lock under another prefix
//     (ids "conflocks-<random>#<name>", a prefix of the rule's own).
//   - CancelledContext: under a cancelled context every method returns an
//     error, not an answer about the record, and writes nothing.
//
// What only a store's own tests can check, since the interface cannot
// express it: records the protocol did not write (another application's
// item under the same id, an item edited by hand: store.RecordError), a
// record written without a fence (Fence 0, as versions before fencing
// wrote them), TTL's deletion itself, a store's answers to its own faults
// (throttling, a lost answer retried by the client), and which errors match
// store.ErrUnavailable or store.ErrMisconfigured.
func TestStore(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	runRules(t, rules, func(t *testing.T, c *conf) { c.s = newStore(t) })
}

// runRules runs each of rs as a parallel subtest, on a conf of its own
// whose store open sets.
func runRules(t *testing.T, rs []rule, open func(t *testing.T, c *conf)) {
	t.Helper()
	for _, r := range rs {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			c := &conf{t: t, ctx: t.Context(), rule: r.name, says: r.says, tag: randomTag(t)}
			open(t, c)
			c.base = time.Now().Truncate(time.Millisecond)
			c.admin, _ = c.s.(store.Admin)
			r.check(c)
		})
	}
}

// rule is one subtest of TestStore: says is the rule in a store author's
// words, the prefix of each of its failures.
type rule struct {
	name  string
	says  string
	check func(c *conf)
}

var rules = []rule{
	{"AcquireNew", "Acquire on no record takes the lock", ruleAcquireNew},
	{"OneLiveHolder", "one live holder per key", ruleOneLiveHolder},
	{"ConcurrentAcquire", "one winner among racing Acquires", ruleConcurrentAcquire},
	{"TakeoverAfterExpiry", "an expired lock is taken over", ruleTakeoverAfterExpiry},
	{"OwnAcquireRetry", "Acquire recognises its own earlier attempt", ruleOwnAcquireRetry},
	{"Renew", "Renew is conditional on the owner's live lock", ruleRenew},
	{"Complete", "Complete is conditional on the owner", ruleComplete},
	{"DedupeWindow", "a completed key is a duplicate until its window ends", ruleDedupeWindow},
	{"Release", "Release is conditional on the owner's lock and frees the key at once", ruleRelease},
	{"OperatorRelease", "the operator's release frees a live lock", ruleOperatorRelease},
	{"GiveUpRelease", "a release by owner alone frees the owner's lock and no other", ruleGiveUpRelease},
	{"FenceGrows", "the fence grows on every acquisition", ruleFenceGrows},
	{"Payload", "Acquire stores the payload hash and a refusal carries it", rulePayload},
	{"Read", "Read returns the latest write", ruleRead},
	{"Forget", "Forget deletes only the completion it read", ruleForget},
	{"Locks", "Locks lists the prefix's locks and nothing else", ruleLocks},
	{"CancelledContext", "a cancelled context writes nothing", ruleCancelledContext},
	{"Result", "Complete stores the result, a refusal carries it, and a new lock drops it", ruleResult},
	{"Outbox", "Complete stores the outbox, a refusal carries it, only MarkSent of that completion removes it, and a new lock drops it", ruleOutbox},
}

// Lock lengths and windows the rules use. Any would do; these keep every
// time in the messages readable.
const (
	lockFor   = 10 * time.Second
	windowFor = time.Minute
)

func ruleAcquireNew(c *conf) {
	id, a := c.id("k"), c.owner("a")
	// A lock's expiry below the millisecond is cut to it: the record keeps
	// milliseconds (mid-second, so that one kept in seconds always shows).
	lockUntil := c.midSecond(time.Minute).Add(500 * time.Microsecond)
	lease, err := c.acquire(c.req(id, a, "hash-a", c.base, lockUntil))
	if err != nil {
		c.fatalf("Acquire on an id with no record failed: %v", err)
	}
	if want := store.FenceSeed(c.base) + 1; lease.Fence != want {
		c.errorf("the lease's fence is %d; a new record's first fence is FenceSeed(Now)+1 = %d (the clock in milliseconds, so that it is above every fence of a record deleted before)", lease.Fence, want)
	}
	if lease.TookOver {
		c.errorf("the lease says TookOver, but there was no record to take over")
	}
	if lease.ID != id || lease.Owner != a {
		c.errorf("the lease is for id %q, owner %q; want the request's %q, %q", lease.ID, lease.Owner, id, a)
	}
	if !lease.LockExpiresAt.Truncate(time.Millisecond).Equal(lockUntil.Truncate(time.Millisecond)) {
		c.errorf("the lease's LockExpiresAt is %s; want the request's LockUntil %s", show(lease.LockExpiresAt), show(lockUntil))
	}
	rec := c.read(id, "the Acquire")
	want := store.Record{ID: id, Status: store.StatusProcessing, Owner: a, Fence: lease.Fence,
		LockExpiresAt: lockUntil.Truncate(time.Millisecond), ExpiresAt: rec.ExpiresAt, PayloadHash: "hash-a"}
	if !sameRecord(rec, want) {
		c.errorf("the record reads back as %s; want %s (the lock's expiry kept to the millisecond)", showRecord(rec), showRecord(want))
	}
	if !retained(rec.ExpiresAt, lockUntil) {
		c.errorf("the lock's record expires (TTL, ExpiresAt) at %s, before its lock expiry %s + FenceRetention: TTL could delete the record, and its fence, while a holder may still act; want zero (never) or at least that", show(rec.ExpiresAt), show(lockUntil))
	}
}

func ruleOneLiveHolder(c *conf) {
	id, a, b := c.id("k"), c.owner("a"), c.owner("b")
	lease := c.mustAcquire("owner a's first Acquire", c.req(id, a, "", c.base, c.at(lockFor)))
	held := c.read(id, "owner a's Acquire")
	expiry := held.LockExpiresAt
	for _, try := range []struct {
		what string
		now  time.Time
	}{
		{"at the same time", c.base},
		{"before the lock's expiry", expiry.Add(-time.Second)},
		{"at exactly LockExpiresAt (a lock is live up to and including its expiry)", expiry},
	} {
		_, err := c.acquire(c.req(id, b, "", try.now, try.now.Add(lockFor)))
		h := c.wantHeld(err, fmt.Sprintf("owner b's Acquire %s of owner a's live lock", try.what))
		if h == nil {
			continue
		}
		if !errors.Is(err, store.ErrInProgress) || errors.Is(err, store.ErrDuplicate) {
			c.errorf("owner b's Acquire %s: the HeldError matches ErrInProgress %v, ErrDuplicate %v; a live lock is in progress, not a duplicate (its Record.Status is %q)", try.what, errors.Is(err, store.ErrInProgress), errors.Is(err, store.ErrDuplicate), h.Record.Status)
		}
		want := store.Record{ID: id, Status: store.StatusProcessing, Owner: a, Fence: lease.Fence, LockExpiresAt: expiry}
		if got := h.Record; got.ID != want.ID || got.Status != want.Status || got.Owner != want.Owner || got.Fence != want.Fence || !got.LockExpiresAt.Equal(want.LockExpiresAt) {
			c.errorf("owner b's Acquire %s: the HeldError carries %s; want the record that refused it, %s: the caller reports who holds the key and until when", try.what, showRecord(got), showRecord(want))
		}
		if !h.Until().Equal(expiry) {
			c.errorf("owner b's Acquire %s: the HeldError's Until() is %s; want the lock's expiry %s", try.what, show(h.Until()), show(expiry))
		}
		c.wantUnchanged(id, held, "owner b's refused Acquire "+try.what)
	}
}

func ruleConcurrentAcquire(c *conf) {
	id := c.id("k")
	const racers = 8
	// race runs racers Acquires of distinct owners at now, started together,
	// and returns the one winner's lease.
	race := func(round int, what string, now time.Time) (store.Lease, bool) {
		var (
			wg     sync.WaitGroup
			start  = make(chan struct{})
			leases [racers]store.Lease
			errs   [racers]error
		)
		for i := range racers {
			wg.Go(func() {
				<-start
				leases[i], errs[i] = c.acquire(c.req(id, c.owner(fmt.Sprintf("racer%d-%d", round, i)), "", now, now.Add(lockFor)))
			})
		}
		close(start)
		wg.Wait()
		var won []store.Lease
		for i, err := range errs {
			if err == nil {
				won = append(won, leases[i])
			}
		}
		if len(won) != 1 {
			c.errorf("%d owners raced to Acquire %s and %d won (%v); exactly one may: Acquire's check and write must be one atomic step", racers, what, len(won), errs)
			return store.Lease{}, false
		}
		winner := won[0]
		for i, err := range errs {
			if err == nil {
				continue
			}
			if h := c.wantHeld(err, fmt.Sprintf("a losing racer's Acquire %s", what)); h != nil && (h.Record.Owner != winner.Owner || h.Record.Fence != winner.Fence) {
				c.errorf("racer %d lost the race to Acquire %s, and its HeldError carries %s; want the winner's lock (owner %q, fence %d)", i, what, showRecord(h.Record), winner.Owner, winner.Fence)
			}
		}
		if rec := c.read(id, "the race "+what); rec.Owner != winner.Owner || rec.Fence != winner.Fence || rec.Status != store.StatusProcessing {
			c.errorf("after the race to Acquire %s the record is %s; want the winner's lock (owner %q, fence %d)", what, showRecord(rec), winner.Owner, winner.Fence)
		}
		return winner, true
	}
	first, ok := race(1, "a key with no record", c.base)
	if !ok {
		return
	}
	if second, ok := race(2, "a key whose lock expired", first.LockExpiresAt.Add(time.Second)); ok && second.Fence != first.Fence+1 {
		c.errorf("the takeover race's winner has fence %d; want one more than the expired lock's %d", second.Fence, first.Fence)
	}
}

func ruleTakeoverAfterExpiry(c *conf) {
	id, a, b := c.id("k"), c.owner("a"), c.owner("b")
	first := c.mustAcquire("owner a's Acquire", c.req(id, a, "", c.base, c.at(lockFor)))
	expiry := c.read(id, "owner a's Acquire").LockExpiresAt
	now := expiry.Add(time.Millisecond)
	lease, err := c.acquire(c.req(id, b, "", now, now.Add(lockFor)))
	if err != nil {
		c.fatalf("owner b's Acquire one millisecond after owner a's lock expired (%s) failed: %v; an expired lock (LockExpiresAt before Now) must be taken over", show(expiry), err)
	}
	if !lease.TookOver {
		c.errorf("the takeover of an expired lock has TookOver false; want true")
	}
	if lease.Fence != first.Fence+1 {
		c.errorf("the takeover's fence is %d; want the expired lock's %d plus one", lease.Fence, first.Fence)
	}
	rec := c.read(id, "the takeover")
	if rec.Status != store.StatusProcessing || rec.Owner != b || rec.Fence != lease.Fence || !rec.LockExpiresAt.Equal(now.Add(lockFor)) {
		c.errorf("after the takeover the record is %s; want owner b's lock (PROCESSING, owner %q, fence %d, lockExpiresAt %s)", showRecord(rec), b, lease.Fence, show(now.Add(lockFor)))
	}
}

func ruleOwnAcquireRetry(c *conf) {
	id, a := c.id("k"), c.owner("a")
	req := c.req(id, a, "hash-a", c.base, c.at(lockFor))
	first := c.mustAcquire("the first Acquire", req)
	held := c.read(id, "the first Acquire")
	for i := range 2 {
		lease, err := c.acquire(req)
		if err != nil {
			c.errorf("repeat %d of an applied Acquire (same owner, its lock live) failed: %v; a client retries a call whose answer was lost, and the store must recognise its own lock by the owner, not report it held by another", i+1, err)
			continue
		}
		if lease.Fence != first.Fence || lease.Owner != a || lease.ID != id {
			c.errorf("repeat %d of an applied Acquire returned fence %d (owner %q); want the first attempt's fence %d: the retry is the same acquisition, not a new one", i+1, lease.Fence, lease.Owner, first.Fence)
		}
		c.wantUnchanged(id, held, fmt.Sprintf("repeat %d of an applied Acquire", i+1))
	}
}

func ruleRenew(c *conf) {
	id, a, b := c.id("k"), c.owner("a"), c.owner("b")
	lease := c.mustAcquire("owner a's Acquire", c.req(id, a, "", c.base, c.at(lockFor)))
	until := c.at(4*lockFor + 500*time.Microsecond)
	renewed, err := c.s.Renew(c.ctx, lease, until)
	if err != nil {
		c.fatalf("the owner's Renew of its live lock failed: %v", err)
	}
	if !renewed.LockExpiresAt.Truncate(time.Millisecond).Equal(until.Truncate(time.Millisecond)) || renewed.Fence != lease.Fence || renewed.Owner != a {
		c.errorf("Renew returned the lease %+v; want the same lease (owner %q, fence %d) with LockExpiresAt %s", renewed, a, lease.Fence, show(until))
	}
	rec := c.read(id, "Renew")
	if rec.Status != store.StatusProcessing || rec.Owner != a || rec.Fence != lease.Fence || !rec.LockExpiresAt.Equal(until.Truncate(time.Millisecond)) {
		c.errorf("after Renew the record is %s; want owner a's lock with fence %d until %s", showRecord(rec), lease.Fence, show(until.Truncate(time.Millisecond)))
	}
	if !retained(rec.ExpiresAt, until) {
		c.errorf("after Renew the record expires (TTL, ExpiresAt) at %s, before the new lock expiry + FenceRetention; want zero (never) or at least that", show(rec.ExpiresAt))
	}
	if _, err := c.s.Renew(c.ctx, lease, until); err != nil {
		c.errorf("a repeat of an applied Renew failed: %v; it must succeed again (its answer may have been lost)", err)
	}
	c.wantUnchanged(id, rec, "a repeat of an applied Renew")

	other := store.Lease{ID: id, Owner: b, Fence: lease.Fence}
	c.wantLost(c.renewErr(other, c.at(time.Hour)), "Renew with another owner's lease")
	c.wantUnchanged(id, rec, "a Renew with another owner's lease")

	// After a takeover: the old holder's Renew must not extend the new
	// holder's lock.
	id2 := c.id("takeover")
	old := c.mustAcquire("owner a's Acquire", c.req(id2, a, "", c.base, c.at(lockFor)))
	now := c.at(lockFor + time.Millisecond)
	c.mustAcquire("owner b's takeover of the expired lock", c.req(id2, b, "", now, now.Add(lockFor)))
	taken := c.read(id2, "the takeover")
	c.wantLost(c.renewErr(old, c.at(time.Hour)), "Renew by the holder whose lock was taken over")
	c.wantUnchanged(id2, taken, "the old holder's Renew after a takeover")

	// A completed or released record has no lock to renew: renewing it
	// would change a window or revive a lock someone else may take.
	id3 := c.id("completed")
	done := c.mustAcquire("owner a's Acquire", c.req(id3, a, "", c.base, c.at(lockFor)))
	c.must(c.s.Complete(c.ctx, done, store.Completion{Until: c.at(windowFor)}), "Complete")
	completed := c.read(id3, "Complete")
	c.wantLost(c.renewErr(done, c.at(time.Hour)), "Renew of the owner's own COMPLETED record")
	c.wantUnchanged(id3, completed, "Renew of a COMPLETED record")

	id4 := c.id("released")
	rel := c.mustAcquire("owner a's Acquire", c.req(id4, a, "", c.base, c.at(lockFor)))
	c.must(c.s.Release(c.ctx, rel, c.base), "Release")
	released := c.read(id4, "Release")
	c.wantLost(c.renewErr(rel, c.at(time.Hour)), "Renew of the owner's own RELEASED record")
	c.wantUnchanged(id4, released, "Renew of a RELEASED record")

	id5 := c.id("absent")
	c.wantLost(c.renewErr(store.Lease{ID: id5, Owner: a, Fence: 1}, c.at(time.Hour)), "Renew of a record that does not exist")
	c.wantGone(id5, "a Renew of a record that does not exist (it must not create one)")
}

func ruleComplete(c *conf) {
	id, a, b := c.id("k"), c.owner("a"), c.owner("b")
	lease := c.mustAcquire("owner a's Acquire", c.req(id, a, "hash-a", c.base, c.at(lockFor)))
	until := c.midSecond(windowFor + time.Second)
	if err := c.s.Complete(c.ctx, lease, store.Completion{Until: until}); err != nil {
		c.fatalf("the owner's Complete of its live lock failed: %v", err)
	}
	rec := c.read(id, "Complete")
	want := store.Record{ID: id, Status: store.StatusCompleted, Owner: a, Fence: lease.Fence,
		LockExpiresAt: rec.LockExpiresAt, ExpiresAt: time.Unix(until.Unix(), 0), PayloadHash: "hash-a"}
	if !sameRecord(rec, want) {
		c.errorf("after Complete the record is %s; want %s: COMPLETED, owner, fence and payload hash kept, ExpiresAt the window's end in whole seconds (until.Unix())", showRecord(rec), showRecord(want))
	}
	if err := c.s.Complete(c.ctx, lease, store.Completion{Until: until}); err != nil {
		c.errorf("a repeat of an applied Complete failed: %v; it must succeed again (its answer may have been lost, and the work did run)", err)
	}
	c.wantUnchanged(id, rec, "a repeat of an applied Complete")

	id2 := c.id("takeover")
	old := c.mustAcquire("owner a's Acquire", c.req(id2, a, "", c.base, c.at(lockFor)))
	now := c.at(lockFor + time.Millisecond)
	c.mustAcquire("owner b's takeover of the expired lock", c.req(id2, b, "", now, now.Add(lockFor)))
	taken := c.read(id2, "the takeover")
	c.wantLost(c.s.Complete(c.ctx, old, store.Completion{Until: c.at(windowFor)}), "Complete by the holder whose lock was taken over")
	c.wantUnchanged(id2, taken, "the old holder's Complete after a takeover (the new holder's lock must stay)")

	id3 := c.id("other")
	c.mustAcquire("owner a's Acquire", c.req(id3, a, "", c.base, c.at(lockFor)))
	live := c.read(id3, "owner a's Acquire")
	c.wantLost(c.s.Complete(c.ctx, store.Lease{ID: id3, Owner: b, Fence: live.Fence}, store.Completion{Until: c.at(windowFor)}), "Complete with another owner's lease")
	c.wantUnchanged(id3, live, "a Complete with another owner's lease")

	id4 := c.id("absent")
	c.wantLost(c.s.Complete(c.ctx, store.Lease{ID: id4, Owner: a, Fence: 1}, store.Completion{Until: c.at(windowFor)}), "Complete of a record that does not exist")
	c.wantGone(id4, "a Complete of a record that does not exist (it must not create one)")
}

func ruleDedupeWindow(c *conf) {
	id, a, b := c.id("k"), c.owner("a"), c.owner("b")
	lease := c.mustAcquire("owner a's Acquire", c.req(id, a, "", c.base, c.at(lockFor)))
	until := c.at(windowFor + 700*time.Millisecond)
	c.must(c.s.Complete(c.ctx, lease, store.Completion{Until: until}), "Complete")
	done := c.read(id, "Complete")
	end := time.Unix(until.Unix(), 0)
	for _, try := range []struct {
		what string
		now  time.Time
	}{
		{"within the window", c.at(time.Second)},
		{"at the window's end (ExpiresAt)", end},
		{"in the window's last second (ExpiresAt + 999ms: the window is kept in whole seconds)", end.Add(999 * time.Millisecond)},
	} {
		_, err := c.acquire(c.req(id, b, "", try.now, try.now.Add(lockFor)))
		h := c.wantHeld(err, "owner b's Acquire of a completed key "+try.what)
		if h == nil {
			continue
		}
		if !errors.Is(err, store.ErrDuplicate) || errors.Is(err, store.ErrInProgress) {
			c.errorf("owner b's Acquire %s: the HeldError matches ErrDuplicate %v, ErrInProgress %v; a completed key is a duplicate (its Record.Status is %q)", try.what, errors.Is(err, store.ErrDuplicate), errors.Is(err, store.ErrInProgress), h.Record.Status)
		}
		if got := h.Record; got.ID != id || got.Status != store.StatusCompleted || got.Owner != a || got.Fence != lease.Fence || !got.ExpiresAt.Equal(end) {
			c.errorf("owner b's Acquire %s: the HeldError carries %s; want the completion (COMPLETED, owner %q, fence %d, expiresAt %s)", try.what, showRecord(got), a, lease.Fence, show(end))
		}
		if !h.Until().Equal(end) {
			c.errorf("owner b's Acquire %s: the HeldError's Until() is %s; want the window's end %s", try.what, show(h.Until()), show(end))
		}
		c.wantUnchanged(id, done, "owner b's refused Acquire "+try.what)
	}
	now := end.Add(time.Second)
	next, err := c.acquire(c.req(id, b, "", now, now.Add(lockFor)))
	if err != nil {
		c.fatalf("owner b's Acquire a second after the window ended (ExpiresAt %s) failed: %v; a completion whose window ended counts as absent (TTL deletes it late)", show(end), err)
	}
	if !next.TookOver || next.Fence != lease.Fence+1 {
		c.errorf("the Acquire after the window ended has fence %d, TookOver %v; want fence %d (one more) and TookOver true", next.Fence, next.TookOver, lease.Fence+1)
	}
}

func ruleRelease(c *conf) {
	id, a, b, x := c.id("k"), c.owner("a"), c.owner("b"), c.owner("x")
	lease := c.mustAcquire("owner a's Acquire", c.req(id, a, "", c.base, c.at(time.Hour)))
	now := c.at(time.Second)
	if err := c.s.Release(c.ctx, lease, now); err != nil {
		c.fatalf("the owner's Release of its live lock failed: %v", err)
	}
	rec := c.read(id, "Release")
	if rec.Status != store.StatusReleased || rec.Owner != a || rec.Fence != lease.Fence {
		c.errorf("after Release the record is %s; want RELEASED with owner %q and fence %d kept (the record stays so that the fence keeps growing)", showRecord(rec), a, lease.Fence)
	}
	if !retained(rec.ExpiresAt, now) {
		c.errorf("the released record expires (TTL, ExpiresAt) at %s, before the Release's now %s + FenceRetention; want zero (never) or at least that", show(rec.ExpiresAt), show(now))
	}
	if err := c.s.Release(c.ctx, lease, now); err != nil {
		c.errorf("a repeat of an applied Release failed: %v; it must succeed again (its answer may have been lost)", err)
	}
	c.wantUnchanged(id, rec, "a repeat of an applied Release")

	// Free at once, long before the released lock's expiry.
	later := now.Add(time.Second)
	next, err := c.acquire(c.req(id, b, "", later, later.Add(lockFor)))
	if err != nil {
		c.fatalf("owner b's Acquire right after the Release (the old lock would expire at %s) failed: %v; a RELEASED record is free at once", show(lease.LockExpiresAt), err)
	}
	if next.Fence != lease.Fence+1 || next.TookOver {
		c.errorf("the Acquire after a Release has fence %d, TookOver %v; want fence %d (one more) and TookOver false (nothing was taken over)", next.Fence, next.TookOver, lease.Fence+1)
	}
	held := c.read(id, "owner b's Acquire")
	c.wantLost(c.s.Release(c.ctx, store.Lease{ID: id, Owner: x, Fence: next.Fence}, later), "Release with another owner's lease")
	c.wantUnchanged(id, held, "a Release with another owner's lease")
	c.wantLost(c.s.Release(c.ctx, lease, later), "owner a's Release again, after owner b acquired the record")
	c.wantUnchanged(id, held, "owner a's Release after owner b acquired the record")

	id2 := c.id("takeover")
	old := c.mustAcquire("owner a's Acquire", c.req(id2, a, "", c.base, c.at(lockFor)))
	tk := c.at(lockFor + time.Millisecond)
	c.mustAcquire("owner b's takeover of the expired lock", c.req(id2, b, "", tk, tk.Add(lockFor)))
	taken := c.read(id2, "the takeover")
	c.wantLost(c.s.Release(c.ctx, old, tk), "Release by the holder whose lock was taken over")
	c.wantUnchanged(id2, taken, "the old holder's Release after a takeover (the new holder's lock must stay)")

	// Releasing a completion would let its duplicates run again.
	id3 := c.id("completed")
	done := c.mustAcquire("owner a's Acquire", c.req(id3, a, "", c.base, c.at(lockFor)))
	c.must(c.s.Complete(c.ctx, done, store.Completion{Until: c.at(windowFor)}), "Complete")
	completed := c.read(id3, "Complete")
	c.wantLost(c.s.Release(c.ctx, done, c.base), "Release of the owner's own COMPLETED record")
	c.wantUnchanged(id3, completed, "a Release of a COMPLETED record")

	id4 := c.id("absent")
	if err := c.s.Release(c.ctx, store.Lease{ID: id4, Owner: a, Fence: 1}, c.base); err != nil {
		c.errorf("Release of a record that does not exist failed: %v; a record gone (deleted, or this call's own applied attempt) is a success: the key is free", err)
	}
	c.wantGone(id4, "a Release of a record that does not exist (it must not create one)")
}

func ruleOperatorRelease(c *conf) {
	id, a, b := c.id("k"), c.owner("a"), c.owner("b")
	c.mustAcquire("owner a's Acquire", c.req(id, a, "", c.base, c.at(time.Hour)))
	rec := c.read(id, "owner a's Acquire")
	// What the sqs-once CLI's release builds from the record it read.
	lease := store.Lease{ID: rec.ID, Owner: rec.Owner, Fence: rec.Fence}
	now := c.at(time.Second)
	if err := c.s.Release(c.ctx, lease, now); err != nil {
		c.fatalf("Release with a Lease built from the Read record (ID, Owner, Fence) failed on a live lock: %v; the operator's release has only what Read returns", err)
	}
	if got := c.read(id, "the operator's release"); got.Status != store.StatusReleased || got.Fence != rec.Fence {
		c.errorf("after the operator's release the record is %s; want RELEASED with fence %d", showRecord(got), rec.Fence)
	}
	next, err := c.acquire(c.req(id, b, "", now, now.Add(lockFor)))
	if err != nil || next.Fence != rec.Fence+1 {
		c.errorf("Acquire after the operator's release: fence %d, error %v; want it taken at once with fence %d", next.Fence, err, rec.Fence+1)
	}
}

func ruleGiveUpRelease(c *conf) {
	id, a, b := c.id("k"), c.owner("a"), c.owner("b")
	// The acquire was applied; its caller never saw the lease.
	lease := c.mustAcquire("owner a's Acquire (its answer lost)", c.req(id, a, "", c.base, c.at(time.Hour)))
	now := c.at(time.Second)
	if err := c.s.Release(c.ctx, store.Lease{ID: id, Owner: a}, now); err != nil {
		c.fatalf("Release with a Lease of only ID and owner (fence 0) failed on the owner's live lock: %v; after an acquire given up on, the fence is unknown, and the lock would stay until it expires", err)
	}
	if got := c.read(id, "the release by owner alone"); got.Status != store.StatusReleased || got.Fence != lease.Fence {
		c.errorf("after the release by owner alone the record is %s; want RELEASED with fence %d", showRecord(got), lease.Fence)
	}

	// Owner a gave up on an acquire that was refused, or never arrived:
	// owner b's lock stays.
	id2 := c.id("held")
	c.mustAcquire("owner b's Acquire", c.req(id2, b, "", c.base, c.at(time.Hour)))
	held := c.read(id2, "owner b's Acquire")
	c.wantLost(c.s.Release(c.ctx, store.Lease{ID: id2, Owner: a}, now), "Release by owner alone of another owner's lock")
	c.wantUnchanged(id2, held, "a Release by owner alone of another owner's lock")
}

func ruleFenceGrows(c *conf) {
	id := c.id("k")
	var fences []int64
	// step acquires at now; onRecord: the record exists, so its fence goes
	// on from the record's by one.
	step := func(what, owner string, now time.Time, onRecord, tookOver bool) store.Lease {
		c.t.Helper()
		lease := c.mustAcquire(what, c.req(id, c.owner(owner), "", now, now.Add(lockFor)))
		if len(fences) > 0 && lease.Fence <= slices.Max(fences) {
			c.errorf("%s: fence %d, not above every earlier fence (so far %v): a downstream store would refuse the new holder as stale, or accept a stale one as current", what, lease.Fence, fences)
		}
		if n := len(fences); onRecord && lease.Fence != fences[n-1]+1 {
			c.errorf("%s: fence %d; want one more than the record's last fence %d", what, lease.Fence, fences[n-1])
		}
		if lease.TookOver != tookOver {
			c.errorf("%s: TookOver %v, want %v", what, lease.TookOver, tookOver)
		}
		if rec := c.read(id, what); rec.Fence != lease.Fence {
			c.errorf("%s: the record's fence is %d, the lease's %d; want them equal", what, rec.Fence, lease.Fence)
		}
		fences = append(fences, lease.Fence)
		return lease
	}
	first := step("the first Acquire", "a", c.base, false, false)
	if want := store.FenceSeed(c.base) + 1; first.Fence != want {
		c.errorf("the first Acquire: fence %d, want FenceSeed(Now)+1 = %d", first.Fence, want)
	}
	expired := c.read(id, "the first Acquire").LockExpiresAt
	took := step("Acquire after the lock expired", "b", expired.Add(time.Millisecond), true, true)
	c.must(c.s.Complete(c.ctx, took, store.Completion{Until: c.at(windowFor)}), "Complete")
	end := c.read(id, "Complete").ExpiresAt
	now := end.Add(time.Second)
	after := step("Acquire after the window ended", "c", now, true, true)
	c.must(c.s.Release(c.ctx, after, now), "Release")
	last := step("Acquire after a release", "d", now, true, false)
	c.must(c.s.Complete(c.ctx, last, store.Completion{Until: now.Add(windowFor)}), "Complete")
	if c.admin == nil {
		c.t.Log("the fence after a deletion is not checked: the store has no store.Admin, so nothing deletes its record")
		return
	}
	c.must(c.admin.Forget(c.ctx, c.read(id, "Complete")), "Forget")
	c.wantGone(id, "Forget")
	// TTL deletes a lock's record FenceRetention after the lock, a
	// completion at its window's end; a new record's fence starts from the
	// clock then, above every fence of the old one.
	later := c.at(store.FenceRetention)
	fresh := step("Acquire after the record was deleted", "e", later, false, false)
	if want := store.FenceSeed(later) + 1; fresh.Fence != want {
		c.errorf("Acquire after the record was deleted: fence %d, want FenceSeed(Now)+1 = %d (a record created again starts from the clock)", fresh.Fence, want)
	}
}

func rulePayload(c *conf) {
	id, a, b := c.id("k"), c.owner("a"), c.owner("b")
	lease := c.mustAcquire("owner a's Acquire with payload hash \"hash-a\"", c.req(id, a, "hash-a", c.base, c.at(lockFor)))
	if rec := c.read(id, "Acquire"); rec.PayloadHash != "hash-a" {
		c.errorf("after Acquire with payload hash %q the record's PayloadHash is %q", "hash-a", rec.PayloadHash)
	}
	// Acquire does not compare hashes: the caller does, with the hash the
	// refusal carries (a conflict is told apart from a duplicate).
	_, err := c.acquire(c.req(id, b, "hash-b", c.base, c.at(lockFor)))
	if h := c.wantHeld(err, "owner b's Acquire with another payload hash, of a live lock"); h != nil && h.Record.PayloadHash != "hash-a" {
		c.errorf("the HeldError of a live lock carries PayloadHash %q; want the stored %q: the caller tells a conflicting payload from the same one by it", h.Record.PayloadHash, "hash-a")
	}
	c.must(c.s.Complete(c.ctx, lease, store.Completion{Until: c.at(windowFor)}), "Complete")
	_, err = c.acquire(c.req(id, b, "hash-b", c.base, c.at(lockFor)))
	if h := c.wantHeld(err, "owner b's Acquire with another payload hash, of a completed key"); h != nil && h.Record.PayloadHash != "hash-a" {
		c.errorf("the HeldError of a completion carries PayloadHash %q; want the stored %q: Complete keeps the hash, and a duplicate with another payload is a conflict", h.Record.PayloadHash, "hash-a")
	}
	end := c.read(id, "Complete").ExpiresAt
	now := end.Add(time.Second)
	c.mustAcquire("owner b's Acquire with no payload hash after the window ended", c.req(id, b, "", now, now.Add(lockFor)))
	if rec := c.read(id, "the takeover"); rec.PayloadHash != "" {
		c.errorf("a takeover with payload hash \"\" left PayloadHash %q: the new lock must not inherit the hash of the record it replaces, or a redelivery of its own message would look like a conflict", rec.PayloadHash)
	}
	now = now.Add(lockFor + time.Millisecond)
	c.mustAcquire("owner c's takeover with payload hash \"hash-c\"", c.req(id, c.owner("c"), "hash-c", now, now.Add(lockFor)))
	if rec := c.read(id, "the takeover"); rec.PayloadHash != "hash-c" {
		c.errorf("a takeover with payload hash %q left PayloadHash %q", "hash-c", rec.PayloadHash)
	}
}

func ruleRead(c *conf) {
	id, a := c.id("k"), c.owner("a")
	if rec, err := c.s.Read(c.ctx, id); !errors.Is(err, store.ErrNotFound) {
		c.errorf("Read of an id with no record returned %s, error %v; want an error matching ErrNotFound", showRecord(rec), err)
	}
	lock := c.at(lockFor)
	lease := c.mustAcquire("Acquire", c.req(id, a, "hash-a", c.base, lock))
	want := store.Record{ID: id, Status: store.StatusProcessing, Owner: a, Fence: lease.Fence, LockExpiresAt: lock, PayloadHash: "hash-a"}
	if rec := c.read(id, "Acquire"); !sameRecord(rec, withExpires(want, rec)) {
		c.errorf("Read after Acquire returned %s; want %s", showRecord(rec), showRecord(want))
	}
	// Every write reads back at once: the protocol reads the record after a
	// refusal that does not carry it, and the operator acts on what it read.
	renewed := c.at(2 * lockFor)
	lease, err := c.s.Renew(c.ctx, lease, renewed)
	if err != nil {
		c.fatalf("Renew: %v", err)
	}
	want.LockExpiresAt = renewed
	if rec := c.read(id, "Renew"); !sameRecord(rec, withExpires(want, rec)) {
		c.errorf("Read after Renew returned %s; want %s: Read must return the latest write (a strongly consistent read)", showRecord(rec), showRecord(want))
	}
	until := c.at(windowFor)
	c.must(c.s.Complete(c.ctx, lease, store.Completion{Until: until}), "Complete")
	if rec := c.read(id, "Complete"); rec.Status != store.StatusCompleted || !rec.ExpiresAt.Equal(time.Unix(until.Unix(), 0)) {
		c.errorf("Read after Complete returned %s; want the COMPLETED record until %s: Read must return the latest write", showRecord(rec), show(time.Unix(until.Unix(), 0)))
	}
}

func ruleForget(c *conf) {
	c.needAdmin()
	id, a, b := c.id("k"), c.owner("a"), c.owner("b")
	lease := c.mustAcquire("owner a's Acquire", c.req(id, a, "", c.base, c.at(lockFor)))
	c.must(c.s.Complete(c.ctx, lease, store.Completion{Until: c.at(windowFor)}), "Complete")
	done := c.read(id, "Complete")
	if err := c.admin.Forget(c.ctx, done); err != nil {
		c.fatalf("Forget of the COMPLETED record just read failed: %v", err)
	}
	c.wantGone(id, "Forget of the COMPLETED record")
	if err := c.admin.Forget(c.ctx, done); err != nil {
		c.errorf("Forget of a record already gone failed: %v; it is a success (this call's own applied attempt, or another operator's): the key is forgotten", err)
	}

	// A live lock: deleting it would let a second holder in.
	id2 := c.id("live")
	c.mustAcquire("owner a's Acquire", c.req(id2, a, "", c.base, c.at(lockFor)))
	live := c.read(id2, "owner a's Acquire")
	c.wantChanged(c.admin.Forget(c.ctx, live), "Forget of a live PROCESSING lock (not a completion)")
	c.wantUnchanged(id2, live, "a refused Forget of a live lock")

	// A released lock: deleting it would lose its fence.
	id3 := c.id("released")
	rel := c.mustAcquire("owner a's Acquire", c.req(id3, a, "", c.base, c.at(lockFor)))
	c.must(c.s.Release(c.ctx, rel, c.base), "Release")
	released := c.read(id3, "Release")
	c.wantChanged(c.admin.Forget(c.ctx, released), "Forget of a RELEASED record (not a completion)")
	c.wantUnchanged(id3, released, "a refused Forget of a RELEASED record")

	// The completion read, then taken over and completed again by another
	// owner since: the operator read a record that is no longer there.
	id4 := c.id("changed")
	first := c.mustAcquire("owner a's Acquire", c.req(id4, a, "", c.base, c.at(lockFor)))
	c.must(c.s.Complete(c.ctx, first, store.Completion{Until: c.at(windowFor)}), "Complete")
	seen := c.read(id4, "Complete")
	now := seen.ExpiresAt.Add(time.Second)
	second := c.mustAcquire("owner b's Acquire after the window ended", c.req(id4, b, "", now, now.Add(lockFor)))
	taken := c.read(id4, "owner b's Acquire")
	c.wantChanged(c.admin.Forget(c.ctx, seen), "Forget of a completion since taken over by another owner's lock")
	c.wantUnchanged(id4, taken, "a refused Forget of a record now another owner's lock")
	c.must(c.s.Complete(c.ctx, second, store.Completion{Until: now.Add(windowFor)}), "owner b's Complete")
	again := c.read(id4, "owner b's Complete")
	c.wantChanged(c.admin.Forget(c.ctx, seen), "Forget of owner a's completion, the record now owner b's completion")
	c.wantUnchanged(id4, again, "a refused Forget of a record now another owner's completion")
}

func ruleCancelledContext(c *conf) {
	a, b := c.owner("a"), c.owner("b")
	id := c.id("lock")
	lease := c.mustAcquire("owner a's Acquire", c.req(id, a, "", c.base, c.at(lockFor)))
	lock := c.read(id, "owner a's Acquire")
	idDone := c.id("completed")
	done := c.mustAcquire("owner a's Acquire", c.req(idDone, a, "", c.base, c.at(lockFor)))
	c.must(c.s.Complete(c.ctx, done, store.Completion{Until: c.at(windowFor)}), "Complete")
	completed := c.read(idDone, "Complete")
	idNone := c.id("absent")

	ctx, cancel := context.WithCancel(c.ctx)
	cancel()
	// Each call would succeed under a live context.
	later := c.at(lockFor + time.Millisecond)
	calls := []struct {
		what string
		id   string
		call func() error
	}{
		{"Acquire of an id with no record", idNone, func() error {
			_, err := c.s.Acquire(ctx, c.req(idNone, b, "", c.base, c.at(lockFor)))
			return err
		}},
		{"Acquire of an expired lock", id, func() error {
			_, err := c.s.Acquire(ctx, c.req(id, b, "", later, later.Add(lockFor)))
			return err
		}},
		{"Renew", id, func() error { _, err := c.s.Renew(ctx, lease, c.at(time.Hour)); return err }},
		{"Complete", id, func() error { return c.s.Complete(ctx, lease, store.Completion{Until: c.at(windowFor)}) }},
		{"Release", id, func() error { return c.s.Release(ctx, lease, c.base) }},
		{"Read", id, func() error { _, err := c.s.Read(ctx, id); return err }},
	}
	if c.admin != nil {
		calls = append(calls, struct {
			what string
			id   string
			call func() error
		}{"Forget", idDone, func() error { return c.admin.Forget(ctx, completed) }})
	}
	for _, call := range calls {
		err := call.call()
		switch {
		case err == nil:
			c.errorf("%s under a cancelled context succeeded; want an error (the caller gave up: it must not act on an answer)", call.what)
		case refusal(err):
			c.errorf("%s under a cancelled context returned %v; want a store error, not an answer about the record (it was not consulted)", call.what, err)
		}
		switch call.id {
		case idNone:
			c.wantGone(idNone, call.what+" under a cancelled context")
		case idDone:
			c.wantUnchanged(idDone, completed, call.what+" under a cancelled context")
		default:
			c.wantUnchanged(id, lock, call.what+" under a cancelled context")
		}
	}
}

// refusal reports whether err is one of the answers a store gives about
// the record.
func refusal(err error) bool {
	var held *store.HeldError
	return errors.As(err, &held) || errors.Is(err, store.ErrLockLost) || errors.Is(err, store.ErrNotFound) ||
		errors.Is(err, store.ErrRecordChanged) || errors.Is(err, store.ErrDuplicate) || errors.Is(err, store.ErrInProgress)
}

// conf is one rule's run: its store, clock and ids.
type conf struct {
	t *testing.T
	s store.Store
	// admin is s as a store.Admin, nil when it is not one.
	admin store.Admin
	ctx   context.Context
	base  time.Time
	rule  string
	says  string
	tag   string

	// tx is s as a store.Transactor and fx its effects, in
	// TestTransactions' rules (nil in TestStore's).
	tx store.Transactor
	fx Effects
}

// needAdmin skips a rule of store.Admin on a store that is not one.
func (c *conf) needAdmin() {
	c.t.Helper()
	if c.admin == nil {
		c.t.Skipf("%T does not implement store.Admin: its rules do not apply", c.s)
	}
}

func ruleLocks(c *conf) {
	c.needAdmin()
	prefix := "conflocks-" + c.tag
	id := func(name string) string { return prefix + "#" + name }
	a, b := c.owner("a"), c.owner("b")
	// Two locks, the later-acquired one expiring first, and one expired.
	late := c.mustAcquire("Acquire of the late lock", c.req(id("late"), a, "", c.base, c.at(2*lockFor)))
	early := c.mustAcquire("Acquire of the early lock", c.req(id("early"), b, "", c.base, c.at(lockFor)))
	expired := c.mustAcquire("Acquire of the expired lock", c.req(id("expired"), a, "", c.at(-2*lockFor), c.at(-lockFor)))
	done := c.mustAcquire("Acquire of the completed key", c.req(id("done"), a, "", c.base, c.at(lockFor)))
	c.must(c.s.Complete(c.ctx, done, store.Completion{Until: c.at(windowFor)}), "Complete")
	rel := c.mustAcquire("Acquire of the released key", c.req(id("released"), a, "", c.base, c.at(lockFor)))
	c.must(c.s.Release(c.ctx, rel, c.base), "Release")
	// A prefix that starts with this one is another prefix.
	c.mustAcquire("Acquire under a longer prefix", c.req(prefix+"x#other", a, "", c.base, c.at(lockFor)))

	calls, lastFound := 0, -1
	locks, err := c.admin.Locks(c.ctx, prefix, func(scanned, found int) { calls, lastFound = calls+1, found })
	if err != nil {
		c.fatalf("Locks(%q) failed: %v", prefix, err)
	}
	var got []string
	for _, rec := range locks {
		got = append(got, rec.ID)
	}
	want := []string{expired.ID, early.ID, late.ID}
	if !slices.Equal(got, want) {
		c.errorf("Locks(%q) listed %v; want the PROCESSING records under the prefix, earliest expiry first, %v (no completion, no released lock, no other prefix's lock)", prefix, got, want)
	}
	for _, rec := range locks {
		if read := c.read(rec.ID, "Locks"); !sameRecord(rec, read) {
			c.errorf("Locks listed %s; Read returns %s: want the same record", showRecord(rec), showRecord(read))
		}
	}
	if calls == 0 || lastFound != len(locks) {
		c.errorf("Locks called progress %d times, last with %d found; want at least once, last with the %d locks listed", calls, lastFound, len(locks))
	}
}

func (c *conf) errorf(format string, args ...any) {
	c.t.Helper()
	c.t.Errorf(c.says+": "+format, args...)
}

func (c *conf) fatalf(format string, args ...any) {
	c.t.Helper()
	c.t.Fatalf(c.says+": "+format, args...)
}

// id is a record id of this rule's own.
func (c *conf) id(name string) string { return "conf#" + c.rule + "-" + name + "-" + c.tag }

// owner is an owner token of this rule's own.
func (c *conf) owner(name string) string { return "conf-" + name + "-" + c.tag }

// at is the rule's base time plus d.
func (c *conf) at(d time.Duration) time.Time { return c.base.Add(d) }

// midSecond is the rule's base plus d, moved to the middle of its second:
// a time that keeping it to the second (a window's until.Unix(), a lock's
// expiry in whole seconds) always changes, whatever the base's
// milliseconds, so that a store that rounds is always caught. It falls
// up to half a second before base + d: a window's end is given a second
// more (windowFor + time.Second), so that its whole second still falls at
// least windowFor after the base, as TestStore promises a shared table.
func (c *conf) midSecond(d time.Duration) time.Time {
	return c.at(d).Truncate(time.Second).Add(500 * time.Millisecond)
}

func (c *conf) req(id, owner, hash string, now, lockUntil time.Time) store.AcquireRequest {
	return store.AcquireRequest{ID: id, Owner: owner, PayloadHash: hash, Now: now, LockUntil: lockUntil}
}

func (c *conf) acquire(req store.AcquireRequest) (store.Lease, error) {
	return c.s.Acquire(c.ctx, req)
}

func (c *conf) renewErr(lease store.Lease, until time.Time) error {
	_, err := c.s.Renew(c.ctx, lease, until)
	return err
}

// mustAcquire is a step the rule builds on; what says which.
func (c *conf) mustAcquire(what string, req store.AcquireRequest) store.Lease {
	c.t.Helper()
	lease, err := c.acquire(req)
	if err != nil {
		c.fatalf("%s (Now %s, LockUntil %s) failed: %v", what, show(req.Now), show(req.LockUntil), err)
	}
	return lease
}

// must stops the rule when a step it builds on fails.
func (c *conf) must(err error, what string) {
	c.t.Helper()
	if err != nil {
		c.fatalf("%s failed: %v", what, err)
	}
}

// read is the record under id, after what.
func (c *conf) read(id, after string) store.Record {
	c.t.Helper()
	rec, err := c.s.Read(c.ctx, id)
	if err != nil {
		c.fatalf("Read of %q after %s failed: %v; want the record", id, after, err)
	}
	return rec
}

func (c *conf) wantGone(id, after string) {
	c.t.Helper()
	if rec, err := c.s.Read(c.ctx, id); !errors.Is(err, store.ErrNotFound) {
		c.errorf("after %s, Read of %q returned %s, error %v; want no record (ErrNotFound)", after, id, showRecord(rec), err)
	}
}

func (c *conf) wantUnchanged(id string, before store.Record, after string) {
	c.t.Helper()
	rec, err := c.s.Read(c.ctx, id)
	if err != nil {
		c.errorf("%s changed the record: it was %s, and Read now returns %v", after, showRecord(before), err)
		return
	}
	if !sameRecord(rec, before) {
		c.errorf("%s changed the record: it was %s, now %s; a refused or repeated call must write nothing new", after, showRecord(before), showRecord(rec))
	}
}

func (c *conf) wantHeld(err error, what string) *store.HeldError {
	c.t.Helper()
	var held *store.HeldError
	if !errors.As(err, &held) {
		c.errorf("%s returned %v; want a *store.HeldError carrying the record that refused it (the caller reads status, owner, fence, expiry and payload hash from it)", what, errOrSuccess(err))
		return nil
	}
	return held
}

func (c *conf) wantLost(err error, what string) {
	c.t.Helper()
	if !errors.Is(err, store.ErrLockLost) {
		c.errorf("%s returned %v; want an error matching ErrLockLost: only the lease's own lock may be written", what, errOrSuccess(err))
	}
}

func (c *conf) wantChanged(err error, what string) {
	c.t.Helper()
	if !errors.Is(err, store.ErrRecordChanged) {
		c.errorf("%s returned %v; want an error matching ErrRecordChanged: Forget deletes only the COMPLETED record of the owner that was read", what, errOrSuccess(err))
	}
}

func errOrSuccess(err error) any {
	if err == nil {
		return "success"
	}
	return err
}

// retained reports whether a lock's record that expires (TTL) at expiresAt
// outlives its lock, which ends at lockEnd, by FenceRetention: to the
// second, which is what TTL keeps; zero is never.
func retained(expiresAt, lockEnd time.Time) bool {
	return expiresAt.IsZero() || !expiresAt.Before(lockEnd.Add(store.FenceRetention).Truncate(time.Second))
}

func sameRecord(a, b store.Record) bool {
	return a.ID == b.ID && a.Status == b.Status && a.Owner == b.Owner && a.Fence == b.Fence &&
		a.LockExpiresAt.Equal(b.LockExpiresAt) && a.ExpiresAt.Equal(b.ExpiresAt) && a.PayloadHash == b.PayloadHash
}

// withExpires is want with got's ExpiresAt, for a comparison that leaves
// the TTL to its own check.
func withExpires(want, got store.Record) store.Record {
	want.ExpiresAt = got.ExpiresAt
	return want
}

func show(t time.Time) string {
	if t.IsZero() {
		return "zero"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func showRecord(rec store.Record) string {
	return fmt.Sprintf("{id %q %s owner %q fence %d lockExpiresAt %s expiresAt %s payloadHash %q}",
		rec.ID, rec.Status, rec.Owner, rec.Fence, show(rec.LockExpiresAt), show(rec.ExpiresAt), rec.PayloadHash)
}

// randomTag keeps the ids of one run apart from every other run's on a
// shared table.
func randomTag(t *testing.T) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func ruleOutbox(c *conf) {
	id, a, b := c.id("k"), c.owner("a"), c.owner("b")
	lease := c.mustAcquire("owner a's Acquire", c.req(id, a, "", c.base, c.at(lockFor)))
	if rec := c.read(id, "Acquire"); rec.Outbox != nil {
		c.errorf("a new lock carries the outbox %q; want none", rec.Outbox)
	}
	lock := c.read(id, "owner a's Acquire")
	// MarkSent of the lock (read before its completion) is refused: the
	// outbox it would remove is not the one it read.
	if err := c.s.MarkSent(c.ctx, lock); !errors.Is(err, store.ErrRecordChanged) {
		c.errorf("MarkSent of a PROCESSING lock returned %v; want an error matching ErrRecordChanged (only a completion's outbox is marked sent)", errOrSuccess(err))
	}
	outbox, result := []byte(`[{"to":"sqs:q","body":"shipped"}]`), []byte(`"r"`)
	sent := bytes.Clone(outbox)
	until := c.at(windowFor)
	c.must(c.s.Complete(c.ctx, lease, store.Completion{Until: until, Result: result, Outbox: outbox}), "owner a's Complete with an outbox")
	copy(outbox, "XXXXXXXX") // the caller's buffer is its own again
	done := c.read(id, "Complete with an outbox")
	if !bytes.Equal(done.Outbox, sent) || !bytes.Equal(done.Result, result) {
		c.errorf("after Complete with an outbox, Read returns Outbox %q, Result %q; want %q and %q, as given", done.Outbox, done.Result, sent, result)
	}
	_, err := c.acquire(c.req(id, b, "", c.at(time.Second), c.at(time.Second+lockFor)))
	if h := c.wantHeld(err, "owner b's Acquire of the completed key"); h != nil && !bytes.Equal(h.Record.Outbox, sent) {
		c.errorf("owner b's refused Acquire: the HeldError's Record.Outbox is %q; want %q (the redelivery that meets the completion sends what is pending, with no second call to read it)", h.Record.Outbox, sent)
	}
	c.must(c.s.MarkSent(c.ctx, done), "MarkSent of the completion as read")
	marked := c.read(id, "MarkSent")
	want := done
	want.Outbox = nil
	if marked.Outbox != nil || !sameRecord(marked, want) || !bytes.Equal(marked.Result, result) {
		c.errorf("after MarkSent the record is %s, Outbox %q, Result %q; want %s with no outbox and the result kept (a duplicate still answers with it)", showRecord(marked), marked.Outbox, marked.Result, showRecord(want))
	}
	if err := c.s.MarkSent(c.ctx, done); err != nil {
		c.errorf("a repeat of MarkSent (another delivery marked it first, or a retry) returned %v; want nil", err)
	}

	// After the window, the key runs again: its new lock drops the old
	// outbox, and MarkSent of the old completion must leave the new one's.
	id2 := c.id("window")
	l2 := c.mustAcquire("owner a's Acquire", c.req(id2, a, "", c.base, c.at(lockFor)))
	c.must(c.s.Complete(c.ctx, l2, store.Completion{Until: until, Outbox: sent}), "owner a's Complete with an outbox")
	old := c.read(id2, "owner a's Complete")
	now := time.Unix(until.Unix(), 0).Add(time.Second)
	next, err := c.acquire(c.req(id2, b, "", now, now.Add(lockFor)))
	if err != nil {
		c.fatalf("owner b's Acquire after the window ended: %v", err)
	}
	if rec := c.read(id2, "the Acquire after the window"); rec.Outbox != nil {
		c.errorf("the lock taken after the window carries the old outbox %q; want none (its messages would be sent again as the new holder's)", rec.Outbox)
	}
	newer := []byte(`[{"to":"sqs:q","body":"b's"}]`)
	c.must(c.s.Complete(c.ctx, next, store.Completion{Until: now.Add(windowFor), Outbox: newer}), "owner b's Complete with an outbox")
	if err := c.s.MarkSent(c.ctx, old); !errors.Is(err, store.ErrRecordChanged) {
		c.errorf("MarkSent of owner a's old completion, the record now owner b's, returned %v; want an error matching ErrRecordChanged", errOrSuccess(err))
	}
	if rec := c.read(id2, "MarkSent of the old completion"); !bytes.Equal(rec.Outbox, newer) {
		c.errorf("MarkSent of an old completion left the new one's outbox %q; want %q: messages not sent would be marked sent", rec.Outbox, newer)
	}
	// The same owner completing the key again after the window (an owner
	// token reused): only the fence tells the two completions apart.
	id3 := c.id("fence")
	l3 := c.mustAcquire("owner a's Acquire", c.req(id3, a, "", c.base, c.at(lockFor)))
	c.must(c.s.Complete(c.ctx, l3, store.Completion{Until: until, Outbox: sent}), "owner a's Complete with an outbox")
	first := c.read(id3, "owner a's first Complete")
	again, err := c.acquire(c.req(id3, a, "", now, now.Add(lockFor)))
	if err != nil {
		c.fatalf("owner a's Acquire after its window ended: %v", err)
	}
	c.must(c.s.Complete(c.ctx, again, store.Completion{Until: now.Add(windowFor), Outbox: newer}), "owner a's second Complete with an outbox")
	if err := c.s.MarkSent(c.ctx, first); !errors.Is(err, store.ErrRecordChanged) {
		c.errorf("MarkSent of owner a's first completion (fence %d), the record now its second (fence %d), returned %v; want an error matching ErrRecordChanged: the condition is the fence, not only the owner", first.Fence, again.Fence, errOrSuccess(err))
	}
	if rec := c.read(id3, "MarkSent of the first completion"); !bytes.Equal(rec.Outbox, newer) {
		c.errorf("MarkSent of the first completion left the second one's outbox %q; want %q", rec.Outbox, newer)
	}
	if err := c.s.MarkSent(c.ctx, store.Record{ID: c.id("gone"), Status: store.StatusCompleted, Owner: a, Fence: 1}); err != nil {
		c.errorf("MarkSent of a record that is gone returned %v; want nil (nothing is left to mark)", err)
	}
}

func ruleResult(c *conf) {
	id, a, b := c.id("k"), c.owner("a"), c.owner("b")
	lease := c.mustAcquire("owner a's Acquire", c.req(id, a, "", c.base, c.at(lockFor)))
	if rec := c.read(id, "Acquire"); rec.Result != nil {
		c.errorf("a new lock carries the result %q; want none", rec.Result)
	}
	result := []byte(`{"order":"o-1","total":12.5}`)
	sent := bytes.Clone(result)
	until := c.at(windowFor)
	c.must(c.s.Complete(c.ctx, lease, store.Completion{Until: until, Result: result}), "owner a's Complete with a result")
	// The caller's buffer is its own again once Complete returns, as a
	// request's body is once it is sent.
	copy(result, "XXXXXXXXXXXX")
	if rec := c.read(id, "Complete with a result"); !bytes.Equal(rec.Result, sent) {
		c.errorf("after Complete with a result, Read returns Result %q; want %q, as given (and not the caller's buffer, reused since)", rec.Result, sent)
	}
	c.must(c.s.Complete(c.ctx, lease, store.Completion{Until: until, Result: sent}), "a repeat of the applied Complete")
	done := c.read(id, "the repeat of Complete")
	if !bytes.Equal(done.Result, sent) {
		c.errorf("after a repeat of Complete, Result is %q; want %q", done.Result, sent)
	}
	_, err := c.acquire(c.req(id, b, "", c.at(time.Second), c.at(time.Second+lockFor)))
	if h := c.wantHeld(err, "owner b's Acquire of the completed key"); h != nil && !bytes.Equal(h.Record.Result, sent) {
		c.errorf("owner b's refused Acquire: the HeldError's Record.Result is %q; want the stored result %q (a duplicate is answered from the refusal, with no second call)", h.Record.Result, sent)
	}

	// After the window, the key runs again: its new lock, and a completion
	// without a result, must not answer with the old result.
	now := time.Unix(until.Unix(), 0).Add(time.Second)
	next, err := c.acquire(c.req(id, b, "", now, now.Add(lockFor)))
	if err != nil {
		c.fatalf("owner b's Acquire after the window ended: %v", err)
	}
	if rec := c.read(id, "the Acquire after the window"); rec.Result != nil {
		c.errorf("the lock taken after the window carries the old result %q; want none", rec.Result)
	}
	c.must(c.s.Complete(c.ctx, next, store.Completion{Until: now.Add(windowFor)}), "owner b's Complete without a result")
	if rec := c.read(id, "a Complete without a result"); rec.Result != nil {
		c.errorf("a Complete without a result left Result %q; want none", rec.Result)
	}

	// The largest result the library stores fits.
	big := bytes.Repeat([]byte("r"), store.MaxResultSize)
	id2 := c.id("max")
	l2 := c.mustAcquire("owner a's Acquire", c.req(id2, a, "", c.base, c.at(lockFor)))
	if err := c.s.Complete(c.ctx, l2, store.Completion{Until: until, Result: big}); err != nil {
		c.errorf("Complete with a result of MaxResultSize (%d) bytes: %v; the store must hold it", store.MaxResultSize, err)
	} else if rec := c.read(id2, "Complete with the largest result"); !bytes.Equal(rec.Result, big) {
		c.errorf("a result of MaxResultSize bytes came back as %d bytes", len(rec.Result))
	}
}
