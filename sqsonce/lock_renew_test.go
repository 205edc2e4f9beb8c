package sqsonce

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

func TestLockRenewalKeepsASlowHandlersLock(t *testing.T) {
	lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
		r := newLockRenewing(t, e, e.store)
		done := r.run("k")

		for range 4 { // 40 s of work under a 30 s lock
			r.tick(t)
			rec, _ := e.read(t, lockID("k"))
			if got, want := rec.LockExpiresAt.UnixMilli(), e.clock.Now().Add(30*time.Second).UnixMilli(); got != want {
				t.Fatalf("lockExpiresAt %d after a renewal, want now + 30 s = %d", got, want)
			}
		}
		// Past the first lock's 30 s, another instance still finds it held.
		other := e.locker(t, e.uncounted).do(context.Background(), "k", "", 0, noResult(lockSucceed))
		if other.outcome != inProgress {
			t.Fatalf("another holder at 40 s: %v, want in-progress: the renewed lock is live", other.outcome)
		}
		r.finish <- nil
		res := <-done
		if res.outcome != processed || res.lockLost || res.fence == 0 {
			t.Fatalf("slow handler: %+v, want processed with its lock", res)
		}
		if got := e.calls.Load(); got != 6 {
			t.Errorf("%d table calls, want 6: acquire, 4 renewals, complete", got)
		}
	})
}

func TestLockAHandlerShorterThanTheRenewalIntervalMakesNoExtraCall(t *testing.T) {
	lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
		l := newLockRenewing(t, e, e.store).locker
		if res := l.do(context.Background(), "k", "", 0, noResult(lockSucceed)); res.outcome != processed {
			t.Fatal(res.err)
		}
		if res := l.do(context.Background(), "k", "", 0, noResult(lockSucceed)); res.outcome != duplicate {
			t.Fatal(res.err)
		}
		if res := l.do(context.Background(), "f", "", 0, noResult(func(context.Context) error { return errors.New("no") })); res.outcome != failed {
			t.Fatal(res.err)
		}
		if got := e.calls.Load(); got != 5 {
			t.Errorf("%d table calls, want 5: new 2, duplicate 1, failure 2", got)
		}
	})
}

func TestLockRenewalThatFindsTheLockTakenOverCancelsTheHandler(t *testing.T) {
	lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
		r := newLockRenewing(t, e, e.store)
		done := r.run("k")

		// Another holder took the key over: what happens when this one was
		// paused longer than its lock (the case renewal cannot close).
		e.put(t, store.Record{ID: lockID("k"), Status: store.StatusProcessing, Owner: "successor", Fence: 2,
			LockExpiresAt: e.clock.Now().Add(time.Minute)})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := e.clock.WaitForWaiters(ctx, 1); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(10 * time.Second)

		res := <-done
		if res.outcome != failed || !res.lockLost || !errors.Is(res.err, ErrLockLost) {
			t.Fatalf("handler after losing its lock: %+v; want failed, its context cancelled with ErrLockLost", res)
		}
		if rec, _ := e.read(t, lockID("k")); rec.Owner != "successor" {
			t.Errorf("owner %s: the holder that lost its lock touched the successor's record", rec.Owner)
		}
	})
}
