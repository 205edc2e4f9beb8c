package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// Effects is a store's own kind of write, for TestTransactions: one counter
// per name that a transaction's write increments.
type Effects interface {
	// Add adds to tx one increment of name's counter; with refused, instead
	// a write whose own condition fails when the transaction commits
	// (incrementing nothing).
	Add(ctx context.Context, tx store.Tx, name string, refused bool) error
	// Count returns the committed increments of name's counter (0 when
	// none).
	Count(ctx context.Context, name string) (int, error)
}

// TestTransactions is the conformance suite of a store.Transactor: the
// rules of store.Tx's documentation that exactly-once effects rely on (the
// work's writes commit with the completion, both or neither, and only
// under the lease's own lock), one subtest per rule. A store passes
// TestStore too; this suite adds the transaction's rules. It runs from a
// test in the store's own package, with an Effects of the store's own kind
// of write:
//
//	func TestMyStoreTransactions(t *testing.T) {
//		storetest.TestTransactions(t, func(t *testing.T) (store.Transactor, storetest.Effects) {
//			s := mystore.New(...) // a fresh store, or one on a shared table
//			return s, myEffects{s} // increments counters, with mystore's own writes
//		})
//	}
//
// newStore is called once per rule, from subtests that run in parallel,
// as TestStore calls it, with the same promises: every rule writes only
// records of its own (ids "conf#<rule>-<name>-<random>") and counters of
// its own (names of the same form), the suite never sleeps, and it passes
// each call's clock explicitly. Each transaction a rule begins ends as
// the lock ends one: with one Commit or one Rollback (a repeated Commit
// where the rule is the repeat), or not at all while Empty.
//
// The rules (subtests):
//
//   - EmptyUntilAdded: Begin's transaction is Empty; after an Add (an
//     increment, or a refused write alone) it is not.
//   - EffectIffCompletion: a Commit applies every write (each counter 1)
//     and completes the record as Store.Complete does: COMPLETED, owner,
//     fence and payload hash kept, ExpiresAt until in whole seconds
//     (until.Unix()), the result stored, the lock expiry removed. A
//     Rollback applies nothing: the record stays the lease's PROCESSING
//     lock, and Release frees it.
//   - LostLockCommitsNothing: the Commit of a holder whose lock expired
//     and was taken over matches ErrLockLost, applies none of its writes
//     and leaves the new holder's record as it was; the new holder's own
//     Commit applies its writes. A record released and acquired again by
//     the same owner (the fence moved) refuses the first lease's Commit
//     too: the record's condition is the fence, not only the owner.
//   - CommitRepeatRecognised: a repeat of an applied Commit, with the same
//     arguments (a retry after its answer was lost), returns nil and
//     applies nothing more: each counter stays 1, the record as it was.
//   - UserConditionFails: a transaction with a refused write returns a
//     *store.EffectError (errors.As) for the record's id and applies none
//     of its writes, the increments beside the refused one included; the
//     record stays the lease's PROCESSING lock, Release frees it, and the
//     work run again under a new lock commits.
//   - ResultAndWindow: the result and window a Commit stores are those
//     Complete stores (Read shows them, the caller's buffer reused since
//     does not change them, the largest result the library stores fits):
//     a duplicate Acquire within the window (its last second included)
//     is a *store.HeldError matching ErrDuplicate carrying the result, and
//     after it the key is acquired again with the next fence.
//   - SealedTakesNothing: once sealed (the work has returned), a
//     transaction takes no write: Effects.Add fails with an error matching
//     store.ErrTxEnded, never nil, and the Commit applies exactly the
//     writes added before the seal. After a Commit or a Rollback, Add fails
//     the same way.
//   - OutboxWithCommit: a Commit stores its Completion's outbox with the
//     record as Complete does; a Commit refused (a write's condition, a
//     lost lock) stores none on the record.
func TestTransactions(t *testing.T, newStore func(t *testing.T) (store.Transactor, Effects)) {
	t.Helper()
	runRules(t, txRules, func(t *testing.T, c *conf) {
		c.tx, c.fx = newStore(t)
		c.s = c.tx
	})
}

var txRules = []rule{
	{"EmptyUntilAdded", "a transaction is Empty until the work adds a write", ruleEmptyUntilAdded},
	{"EffectIffCompletion", "the writes commit if and only if the completion does", ruleEffectIffCompletion},
	{"LostLockCommitsNothing", "a commit under a lost lock applies none of its writes", ruleLostLockCommitsNothing},
	{"CommitRepeatRecognised", "a repeated commit is recognised as the caller's own and applies nothing more", ruleCommitRepeatRecognised},
	{"UserConditionFails", "a write's own failed condition refuses the whole transaction and leaves the lock releasable", ruleUserConditionFails},
	{"ResultAndWindow", "a commit stores the result and window Complete stores", ruleResultAndWindow},
	{"SealedTakesNothing", "a transaction refuses every write once its work has returned, never dropping one with a nil error", ruleSealedTakesNothing},
	{"OutboxWithCommit", "a commit stores the outbox if and only if it commits", ruleOutboxWithCommit},
}

func ruleEmptyUntilAdded(c *conf) {
	lease := c.mustAcquire("owner a's Acquire", c.req(c.id("k"), c.owner("a"), "", c.base, c.at(lockFor)))
	tx := c.tx.Begin(lease)
	if !tx.Empty() {
		c.errorf("Begin's transaction is not Empty; want Empty until the work adds a write: the lock would commit a transaction of nothing where Store.Complete costs less")
	}
	c.add(tx, c.id("n"), false)
	if tx.Empty() {
		c.errorf("after an Add the transaction is Empty; want not: the lock completes an Empty transaction with Store.Complete, and the work's write would be dropped")
	}
	c.must(tx.Rollback(c.ctx), "Rollback")

	// A condition of the work's alone is a write too: committing without
	// it would skip the check the work relies on.
	lease2 := c.mustAcquire("owner a's Acquire", c.req(c.id("refused"), c.owner("a"), "", c.base, c.at(lockFor)))
	tx2 := c.tx.Begin(lease2)
	c.add(tx2, c.id("r"), true)
	if tx2.Empty() {
		c.errorf("after an Add of a refused write alone the transaction is Empty; want not: its condition must be checked when the transaction commits")
	}
	c.must(tx2.Rollback(c.ctx), "Rollback")
}

func ruleEffectIffCompletion(c *conf) {
	id, a := c.id("commit"), c.owner("a")
	lease := c.mustAcquire("owner a's Acquire", c.req(id, a, "hash-a", c.base, c.at(lockFor)))
	tx := c.tx.Begin(lease)
	n1, n2 := c.id("n1"), c.id("n2")
	c.add(tx, n1, false)
	c.add(tx, n2, false)
	c.wantCount(n1, 0, "an Add, before any Commit (a write applied then would not be the transaction's)")
	until, result := c.midSecond(windowFor+time.Second), []byte(`{"order":"o-1"}`)
	if err := tx.Commit(c.ctx, store.Completion{Until: until, Result: result}); err != nil {
		c.fatalf("the Commit of owner a's transaction under its live lock failed: %v", err)
	}
	c.wantCount(n1, 1, "the Commit")
	c.wantCount(n2, 1, "the Commit")
	rec := c.read(id, "the Commit")
	want := store.Record{ID: id, Status: store.StatusCompleted, Owner: a, Fence: lease.Fence, ExpiresAt: time.Unix(until.Unix(), 0), PayloadHash: "hash-a"}
	if !sameRecord(rec, want) || !bytes.Equal(rec.Result, result) {
		c.errorf("after the Commit the record is %s, result %q; want %s, result %q: COMPLETED as Store.Complete writes it (owner, fence and payload hash kept, ExpiresAt the window's end in whole seconds, the lock expiry removed)", showRecord(rec), rec.Result, showRecord(want), result)
	}
	// The same completion by Store.Complete, beside it: the transaction's
	// record is the one a plain completion writes.
	twinID := c.id("complete")
	twin := c.mustAcquire("owner a's Acquire", c.req(twinID, a, "hash-a", c.base, c.at(lockFor)))
	c.must(c.s.Complete(c.ctx, twin, store.Completion{Until: until, Result: result}), "Complete")
	plain := c.read(twinID, "Complete")
	if !rec.LockExpiresAt.Equal(plain.LockExpiresAt) || !rec.ExpiresAt.Equal(plain.ExpiresAt) || rec.Status != plain.Status {
		c.errorf("after the Commit the record is %s; Store.Complete with the same until wrote %s: want the same status, lock expiry and window", showRecord(rec), showRecord(plain))
	}

	id2 := c.id("rollback")
	lease2 := c.mustAcquire("owner a's Acquire", c.req(id2, a, "hash-a", c.base, c.at(lockFor)))
	lock := c.read(id2, "owner a's Acquire")
	tx2 := c.tx.Begin(lease2)
	r := c.id("r")
	c.add(tx2, r, false)
	if err := tx2.Rollback(c.ctx); err != nil {
		c.errorf("Rollback of an uncommitted transaction failed: %v", err)
	}
	c.wantCount(r, 0, "the Rollback")
	c.wantUnchanged(id2, lock, "the Rollback (the lock stays the lease's: its holder releases it)")
	if err := c.s.Release(c.ctx, lease2, c.base); err != nil {
		c.errorf("Release after the Rollback failed: %v; the lock is still the lease's", err)
	} else if rec := c.read(id2, "Release"); rec.Status != store.StatusReleased {
		c.errorf("after the Rollback and Release the record is %s; want RELEASED", showRecord(rec))
	}
	c.wantCount(r, 0, "the Rollback and Release")
}

func ruleLostLockCommitsNothing(c *conf) {
	id, a, b := c.id("takeover"), c.owner("a"), c.owner("b")
	old := c.mustAcquire("owner a's Acquire", c.req(id, a, "", c.base, c.at(lockFor)))
	txA := c.tx.Begin(old)
	na := c.id("a")
	c.add(txA, na, false)
	now := c.at(lockFor + time.Millisecond)
	took := c.mustAcquire("owner b's takeover of the expired lock", c.req(id, b, "", now, now.Add(lockFor)))
	taken := c.read(id, "the takeover")
	c.wantLost(txA.Commit(c.ctx, store.Completion{Until: c.at(windowFor), Result: []byte("a")}), "the Commit of owner a, whose lock was taken over")
	c.wantCount(na, 0, "the Commit of a holder whose lock was taken over (its effect would be applied twice: the new holder runs the work again)")
	c.wantUnchanged(id, taken, "the Commit of owner a after the takeover (the new holder's lock must stay)")
	txB := c.tx.Begin(took)
	nb := c.id("b")
	c.add(txB, nb, false)
	if err := txB.Commit(c.ctx, store.Completion{Until: now.Add(windowFor), Result: []byte("b")}); err != nil {
		c.errorf("the new holder's Commit failed: %v", err)
	}
	c.wantCount(nb, 1, "the new holder's Commit")
	c.wantCount(na, 0, "the new holder's Commit")

	// The same owner acquires the key again after releasing it (its next
	// delivery): only the fence tells the old lease from the new one.
	id2 := c.id("fence")
	first := c.mustAcquire("owner a's Acquire", c.req(id2, a, "", c.base, c.at(lockFor)))
	tx1 := c.tx.Begin(first)
	n1 := c.id("first")
	c.add(tx1, n1, false)
	c.must(c.s.Release(c.ctx, first, c.base), "Release")
	again := c.mustAcquire("owner a's Acquire after its Release", c.req(id2, a, "", c.base, c.at(lockFor)))
	if again.Fence == first.Fence {
		c.fatalf("owner a's Acquire after its Release kept the fence %d; want it moved (TestStore's FenceGrows)", first.Fence)
	}
	relocked := c.read(id2, "owner a's Acquire after its Release")
	c.wantLost(tx1.Commit(c.ctx, store.Completion{Until: c.at(windowFor)}), fmt.Sprintf("the Commit of owner a's first lease (fence %d), the record now its lock with fence %d", first.Fence, again.Fence))
	c.wantCount(n1, 0, "the Commit of a lease whose fence moved")
	c.wantUnchanged(id2, relocked, "the Commit of a lease whose fence moved (the record's condition is owner and fence)")
}

func ruleCommitRepeatRecognised(c *conf) {
	id, a := c.id("k"), c.owner("a")
	lease := c.mustAcquire("owner a's Acquire", c.req(id, a, "", c.base, c.at(lockFor)))
	tx := c.tx.Begin(lease)
	n := c.id("n")
	c.add(tx, n, false)
	until, result := c.at(windowFor), []byte("r")
	c.must(tx.Commit(c.ctx, store.Completion{Until: until, Result: result}), "the Commit")
	c.wantCount(n, 1, "the Commit")
	done := c.read(id, "the Commit")
	for i := range 2 {
		if err := tx.Commit(c.ctx, store.Completion{Until: until, Result: result}); err != nil {
			c.errorf("repeat %d of an applied Commit, same arguments, returned %v; want nil: the lock repeats a Commit whose answer was lost, and the transaction did commit", i+1, err)
		}
		c.wantCount(n, 1, "a repeat of an applied Commit (the writes must not apply twice)")
		c.wantUnchanged(id, done, "a repeat of an applied Commit")
	}
}

func ruleUserConditionFails(c *conf) {
	id, a, b := c.id("k"), c.owner("a"), c.owner("b")
	lease := c.mustAcquire("owner a's Acquire", c.req(id, a, "", c.base, c.at(lockFor)))
	lock := c.read(id, "owner a's Acquire")
	tx := c.tx.Begin(lease)
	before, after := c.id("before"), c.id("after")
	c.add(tx, before, false)
	c.add(tx, c.id("refused"), true)
	c.add(tx, after, false)
	err := tx.Commit(c.ctx, store.Completion{Until: c.at(windowFor), Result: []byte("r")})
	var refused *store.EffectError
	switch {
	case !errors.As(err, &refused):
		c.errorf("the Commit of a transaction with a refused write returned %v; want a *store.EffectError (the work's own failure: the lock releases and the message is retried)", errOrSuccess(err))
	case refused.ID != id:
		c.errorf("the EffectError names record %q; want the lease's %q", refused.ID, id)
	}
	c.wantCount(before, 0, "a refused Commit (an increment added before the refused write)")
	c.wantCount(after, 0, "a refused Commit (an increment added after the refused write)")
	c.wantUnchanged(id, lock, "a refused Commit (the record stays the lease's lock, for its holder to release)")
	if err := c.s.Release(c.ctx, lease, c.base); err != nil {
		c.fatalf("Release after a refused Commit failed: %v; the lock is still the lease's", err)
	}
	// The message retried: the work runs again under a new lock, and its
	// writes commit.
	next := c.mustAcquire("owner b's Acquire after the Release", c.req(id, b, "", c.at(time.Second), c.at(time.Second+lockFor)))
	tx2 := c.tx.Begin(next)
	c.add(tx2, before, false)
	if err := tx2.Commit(c.ctx, store.Completion{Until: c.at(windowFor)}); err != nil {
		c.errorf("the Commit of the work run again, without the refused write, failed: %v", err)
	}
	c.wantCount(before, 1, "the Commit of the work run again")
}

func ruleResultAndWindow(c *conf) {
	id, a, b := c.id("k"), c.owner("a"), c.owner("b")
	lease := c.mustAcquire("owner a's Acquire", c.req(id, a, "", c.base, c.at(lockFor)))
	tx := c.tx.Begin(lease)
	c.add(tx, c.id("n"), false)
	result := []byte(`{"order":"o-1","total":12.5}`)
	sent := bytes.Clone(result)
	until := c.midSecond(windowFor + time.Second)
	c.must(tx.Commit(c.ctx, store.Completion{Until: until, Result: result}), "owner a's Commit with a result")
	// The caller's buffer is its own again once Commit returns.
	copy(result, "XXXXXXXXXXXX")

	twinID := c.id("complete")
	twin := c.mustAcquire("owner a's Acquire", c.req(twinID, a, "", c.base, c.at(lockFor)))
	c.must(c.s.Complete(c.ctx, twin, store.Completion{Until: until, Result: sent}), "Complete with the same result and window")
	plain := c.read(twinID, "Complete")
	rec := c.read(id, "the Commit")
	if !bytes.Equal(rec.Result, sent) || !bytes.Equal(rec.Result, plain.Result) {
		c.errorf("after the Commit, Read returns Result %q; want %q, as given and as Complete stores it (%q), not the caller's buffer reused since", rec.Result, sent, plain.Result)
	}
	if end := time.Unix(until.Unix(), 0); !rec.ExpiresAt.Equal(end) || !rec.ExpiresAt.Equal(plain.ExpiresAt) {
		c.errorf("after the Commit the window ends (ExpiresAt) at %s; want until in whole seconds %s, as Complete stores it (%s)", show(rec.ExpiresAt), show(end), show(plain.ExpiresAt))
	}

	end := rec.ExpiresAt
	for _, now := range []time.Time{c.at(time.Second), end} {
		_, err := c.acquire(c.req(id, b, "", now, now.Add(lockFor)))
		h := c.wantHeld(err, "owner b's Acquire at "+show(now)+", within the committed window")
		if h == nil {
			continue
		}
		if !errors.Is(err, store.ErrDuplicate) || !bytes.Equal(h.Record.Result, sent) || !h.Record.ExpiresAt.Equal(end) {
			c.errorf("owner b's Acquire at %s within the committed window: matches ErrDuplicate %v, the HeldError carries result %q until %s; want a duplicate carrying %q until %s (a duplicate is answered from the refusal)", show(now), errors.Is(err, store.ErrDuplicate), h.Record.Result, show(h.Record.ExpiresAt), sent, show(end))
		}
	}
	now := end.Add(time.Second)
	if next, err := c.acquire(c.req(id, b, "", now, now.Add(lockFor))); err != nil {
		c.errorf("owner b's Acquire after the committed window ended (%s) failed: %v; the window is the one Complete writes", show(end), err)
	} else if next.Fence != lease.Fence+1 {
		c.errorf("owner b's Acquire after the committed window has fence %d; want the committed lease's %d plus one", next.Fence, lease.Fence)
	}

	// The largest result the library stores fits a transaction too.
	big := bytes.Repeat([]byte("r"), store.MaxResultSize)
	id2 := c.id("max")
	l2 := c.mustAcquire("owner a's Acquire", c.req(id2, a, "", c.base, c.at(lockFor)))
	tx2 := c.tx.Begin(l2)
	c.add(tx2, c.id("max"), false)
	if err := tx2.Commit(c.ctx, store.Completion{Until: until, Result: big}); err != nil {
		c.errorf("Commit with a result of MaxResultSize (%d) bytes: %v; the store must hold it", store.MaxResultSize, err)
	} else if rec := c.read(id2, "Commit with the largest result"); !bytes.Equal(rec.Result, big) {
		c.errorf("a result of MaxResultSize bytes came back as %d bytes", len(rec.Result))
	}
}

func ruleSealedTakesNothing(c *conf) {
	id, a := c.id("k"), c.owner("a")
	lease := c.mustAcquire("owner a's Acquire", c.req(id, a, "", c.base, c.at(lockFor)))
	tx := c.tx.Begin(lease)
	before, late := c.id("before"), c.id("late")
	c.add(tx, before, false)
	tx.Seal()
	tx.Seal() // twice: the lock may seal a transaction it gives up after the work returned
	c.wantEnded(c.fx.Add(c.ctx, tx, late, false), "an Add after Seal (a goroutine the work left behind)")
	if tx.Empty() {
		c.errorf("after an Add and Seal the transaction is Empty; want not: the write added before the seal is the work's")
	}
	c.must(tx.Commit(c.ctx, store.Completion{Until: c.at(windowFor)}), "the Commit after Seal")
	c.wantCount(before, 1, "the Commit of a sealed transaction (the write added before the seal)")
	c.wantCount(late, 0, "the Commit of a sealed transaction (the write refused after the seal)")
	c.wantEnded(c.fx.Add(c.ctx, tx, late, false), "an Add after the Commit")
	c.wantCount(late, 0, "an Add after the Commit")

	// Rolled back: nothing more is taken either.
	id2 := c.id("rollback")
	lease2 := c.mustAcquire("owner a's Acquire", c.req(id2, a, "", c.base, c.at(lockFor)))
	tx2 := c.tx.Begin(lease2)
	c.add(tx2, c.id("r"), false)
	c.must(tx2.Rollback(c.ctx), "Rollback")
	c.wantEnded(c.fx.Add(c.ctx, tx2, late, false), "an Add after the Rollback")

	// Sealed while Empty: the lock then completes with Store.Complete, and
	// a later write must still be refused, not left behind in the
	// transaction.
	id3 := c.id("empty")
	lease3 := c.mustAcquire("owner a's Acquire", c.req(id3, a, "", c.base, c.at(lockFor)))
	tx3 := c.tx.Begin(lease3)
	tx3.Seal()
	c.wantEnded(c.fx.Add(c.ctx, tx3, late, false), "an Add after the Seal of an Empty transaction (the lock completes it with Store.Complete)")
	if !tx3.Empty() {
		c.errorf("an Empty transaction is not Empty after a refused Add; want Empty: the refused write is not the work's")
	}
	c.must(c.s.Complete(c.ctx, lease3, store.Completion{Until: c.at(windowFor)}), "Complete")
	c.wantCount(late, 0, "Complete after a refused Add")
}

func ruleOutboxWithCommit(c *conf) {
	id, a, b := c.id("k"), c.owner("a"), c.owner("b")
	outbox := []byte(`[{"to":"sqs:q","body":"shipped"}]`)
	lease := c.mustAcquire("owner a's Acquire", c.req(id, a, "", c.base, c.at(lockFor)))
	tx := c.tx.Begin(lease)
	c.add(tx, c.id("n"), false)
	c.must(tx.Commit(c.ctx, store.Completion{Until: c.at(windowFor), Outbox: outbox}), "the Commit with an outbox")
	if rec := c.read(id, "the Commit"); !bytes.Equal(rec.Outbox, outbox) {
		c.errorf("after a Commit with an outbox, Read returns Outbox %q; want %q", rec.Outbox, outbox)
	}

	id2 := c.id("refused")
	l2 := c.mustAcquire("owner a's Acquire", c.req(id2, a, "", c.base, c.at(lockFor)))
	tx2 := c.tx.Begin(l2)
	c.add(tx2, c.id("r"), true)
	var refused *store.EffectError
	if err := tx2.Commit(c.ctx, store.Completion{Until: c.at(windowFor), Outbox: outbox}); !errors.As(err, &refused) {
		c.fatalf("the Commit of a refused write returned %v; want a *store.EffectError", errOrSuccess(err))
	}
	if rec := c.read(id2, "the refused Commit"); rec.Outbox != nil {
		c.errorf("a refused Commit left Outbox %q on the record; want none: its messages would be sent for an effect never applied", rec.Outbox)
	}

	id3 := c.id("lost")
	old := c.mustAcquire("owner a's Acquire", c.req(id3, a, "", c.base, c.at(lockFor)))
	tx3 := c.tx.Begin(old)
	c.add(tx3, c.id("l"), false)
	now := c.at(lockFor + time.Millisecond)
	c.mustAcquire("owner b's takeover", c.req(id3, b, "", now, now.Add(lockFor)))
	c.wantLost(tx3.Commit(c.ctx, store.Completion{Until: c.at(windowFor), Outbox: outbox}), "the Commit with an outbox of a holder whose lock was taken over")
	if rec := c.read(id3, "the lost Commit"); rec.Outbox != nil {
		c.errorf("the Commit of a holder whose lock was taken over left Outbox %q; want none", rec.Outbox)
	}
}

// wantEnded checks that an Add refused for a transaction that has ended.
func (c *conf) wantEnded(err error, what string) {
	c.t.Helper()
	if !errors.Is(err, store.ErrTxEnded) {
		c.errorf("%s returned %v; want an error matching store.ErrTxEnded: a write the transaction no longer takes must be refused, not dropped", what, errOrSuccess(err))
	}
}

// add adds one of the rule's writes to tx: an increment of name's counter,
// or, refused, a write whose condition fails.
func (c *conf) add(tx store.Tx, name string, refused bool) {
	c.t.Helper()
	if err := c.fx.Add(c.ctx, tx, name, refused); err != nil {
		c.fatalf("Effects.Add of %q (refused %v) failed: %v", name, refused, err)
	}
}

// wantCount checks the committed increments of name's counter after what.
func (c *conf) wantCount(name string, want int, after string) {
	c.t.Helper()
	got, err := c.fx.Count(c.ctx, name)
	if err != nil {
		c.fatalf("Effects.Count of %q failed: %v", name, err)
	}
	if got != want {
		c.errorf("after %s, counter %q was incremented %d times; want %d", after, name, got, want)
	}
}
