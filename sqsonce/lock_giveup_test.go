package sqsonce

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// lockGiveUpStore is a store whose Acquire ends in a store error, as one
// whose SDK retries ran out: when apply is set, the acquire is applied first
// and only its answer is lost. It counts the releases made through it.
type lockGiveUpStore struct {
	store.Store
	apply    bool
	err      error
	releases *atomic.Int32
}

func (s lockGiveUpStore) Acquire(ctx context.Context, req store.AcquireRequest) (store.Lease, error) {
	if s.apply {
		// The store's answer decides nothing here: a refusal or a lock, the
		// caller sees only the error.
		_, _ = s.Store.Acquire(ctx, req)
	}
	return store.Lease{}, s.err
}

func (s lockGiveUpStore) Release(ctx context.Context, lease store.Lease, now time.Time) error {
	s.releases.Add(1)
	return s.Store.Release(ctx, lease, now)
}

// lockGaveUp is the error a store returns when its retries ran out.
var lockGaveUp = fmt.Errorf("acquire: retries exhausted: connection reset: %w", ErrUnavailable)

// TestLockGiveUpLeavesNoLockOfItsOwn: an acquire the store applied but whose
// answer was lost (retries exhausted) is reported not acquired, and leaves
// the key free: the next delivery takes it at once, instead of meeting a
// lock of nobody's as "in progress" until it expires.
func TestLockGiveUpLeavesNoLockOfItsOwn(t *testing.T) {
	lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
		releases := new(atomic.Int32)
		failing := e.locker(t, lockGiveUpStore{Store: e.newStore(), apply: true, err: lockGaveUp, releases: releases})
		ran := false
		res := failing.do(context.Background(), "order-1", "", 0, noResult(func(context.Context) error { ran = true; return nil }))
		if ran || res.outcome != notAcquired || !errors.Is(res.err, ErrUnavailable) {
			t.Fatalf("outcome %v (%v), ran %v; want not-acquired with the store's error, the handler not run", res.outcome, res.err, ran)
		}
		if res.releaseErr != nil {
			t.Errorf("the release after the give-up failed: %v", res.releaseErr)
		}
		if n := releases.Load(); n != 1 {
			t.Errorf("%d releases after the give-up; want one", n)
		}
		if rec, ok := e.read(t, lockID("order-1")); ok && rec.Status != store.StatusReleased {
			t.Fatalf("after the give-up the record is %s; want it released or gone", rec)
		}
		next := e.locker(t, e.newStore())
		if res := next.do(context.Background(), "order-1", "", 0, noResult(lockSucceed)); res.outcome != processed {
			t.Fatalf("the next delivery: %v (%v); want processed at once", res.outcome, res.err)
		}
	})
}

// TestLockGiveUpNeverReleasesAnotherHoldersLock: the release after a
// give-up is conditional on this call's owner; a lock another holder has
// is left exactly as it was, whether or not the failed acquire reached the
// store.
func TestLockGiveUpNeverReleasesAnotherHoldersLock(t *testing.T) {
	for _, apply := range []bool{false, true} {
		t.Run(fmt.Sprintf("applied=%v", apply), func(t *testing.T) {
			lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
				held := e.acquire(t, e.uncounted, "other-holder", "order-2", "", time.Minute)
				before, _ := e.read(t, lockID("order-2"))
				releases := new(atomic.Int32)
				failing := e.locker(t, lockGiveUpStore{Store: e.newStore(), apply: apply, err: lockGaveUp, releases: releases})
				res := failing.do(context.Background(), "order-2", "", 0, noResult(lockSucceed))
				if res.outcome != notAcquired || res.releaseErr != nil {
					t.Fatalf("outcome %v (%v, release %v); want not-acquired, the refused release no failure", res.outcome, res.err, res.releaseErr)
				}
				after, ok := e.read(t, lockID("order-2"))
				if !ok || after.Status != store.StatusProcessing || after.Owner != held.Owner || after.Fence != held.Fence ||
					!after.LockExpiresAt.Equal(before.LockExpiresAt) || !after.ExpiresAt.Equal(before.ExpiresAt) {
					t.Fatalf("another holder's lock changed from %s (lock until %v) to %s (lock until %v)", before, before.LockExpiresAt, after, after.LockExpiresAt)
				}
			})
		})
	}
}

// TestLockGiveUpOnAMisconfiguredStoreReleasesNothing: a misconfigured store
// applied nothing and would refuse the release too: no call is made.
func TestLockGiveUpOnAMisconfiguredStoreReleasesNothing(t *testing.T) {
	lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
		releases := new(atomic.Int32)
		misconfigured := fmt.Errorf("table missing: %w", ErrMisconfigured)
		failing := e.locker(t, lockGiveUpStore{Store: e.newStore(), err: misconfigured, releases: releases})
		if res := failing.do(context.Background(), "order-3", "", 0, noResult(lockSucceed)); res.outcome != notAcquired || !errors.Is(res.err, ErrMisconfigured) {
			t.Fatalf("outcome %v (%v); want not-acquired, misconfigured", res.outcome, res.err)
		}
		if n := releases.Load(); n != 0 {
			t.Errorf("%d releases on a misconfigured store; want none", n)
		}
	})
}
