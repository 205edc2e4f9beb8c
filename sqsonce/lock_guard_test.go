package sqsonce

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

func TestLockConcurrentHoldersRunHandlerOnce(t *testing.T) {
	lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
		const holders = 32
		var runs atomic.Int32
		var wg sync.WaitGroup
		outcomes := make([]lockOutcome, holders)
		start := make(chan struct{})
		for i := range holders {
			// Each holder has its own Store, as separate Lambda instances do.
			l := e.locker(t, e.newStore())
			wg.Go(func() {
				<-start
				outcomes[i] = l.do(context.Background(), "order-42", "", 0, noResult(func(context.Context) error {
					runs.Add(1)
					return nil
				})).outcome
			})
		}
		close(start)
		wg.Wait()

		if got := runs.Load(); got != 1 {
			t.Fatalf("handler ran %d times across %d racing holders, want exactly 1", got, holders)
		}
		count := map[lockOutcome]int{}
		for _, o := range outcomes {
			count[o]++
		}
		if count[processed] != 1 || count[duplicate]+count[inProgress] != holders-1 {
			t.Errorf("outcomes %v: want 1 processed and the rest duplicate or in-progress", count)
		}
	})
}

func TestLockDuplicateAfterCompletionDoesNotRun(t *testing.T) {
	lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
		l := e.locker(t, e.store)
		if res := l.do(context.Background(), "k", "", 0, noResult(lockSucceed)); res.outcome != processed {
			t.Fatalf("first delivery: %v (%v), want processed", res.outcome, res.err)
		}
		rec, _ := e.read(t, lockID("k"))
		if rec.Status != store.StatusCompleted {
			t.Errorf("status = %s, want COMPLETED", rec.Status)
		}
		wantExpiry := e.clock.Now().Add(time.Hour).Unix()
		if got := rec.ExpiresAt.Unix(); got != wantExpiry {
			t.Errorf("expiresAt = %d, want now + dedupe window = %d", got, wantExpiry)
		}

		e.clock.Advance(59 * time.Minute)
		ran := false
		res := l.do(context.Background(), "k", "", 0, noResult(func(context.Context) error { ran = true; return nil }))
		if res.outcome != duplicate || ran {
			t.Fatalf("second delivery: outcome %v, handler ran %v; want duplicate, not run", res.outcome, ran)
		}
		var held *store.HeldError
		if !errors.As(res.err, &held) || !errors.Is(res.err, ErrDuplicate) || held.Until().Unix() != wantExpiry {
			t.Errorf("refusal %v should be a *HeldError matching ErrDuplicate until %d", res.err, wantExpiry)
		}
	})
}

func TestLockInProgressUntilLockExpiresThenTakenOver(t *testing.T) {
	lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
		first := e.acquire(t, e.store, "first", "k", "", 30*time.Second)
		l := e.locker(t, e.store)

		res := l.do(context.Background(), "k", "", 0, noResult(lockSucceed))
		if res.outcome != inProgress || !errors.Is(res.err, ErrInProgress) {
			t.Fatalf("while locked: %v (%v), want in-progress", res.outcome, res.err)
		}
		var held *store.HeldError
		if !errors.As(res.err, &held) || !held.Until().Equal(first.LockExpiresAt) {
			t.Errorf("refusal %v should say the lock ends at %v", res.err, first.LockExpiresAt)
		}

		e.clock.Advance(30*time.Second + time.Millisecond)
		res = l.do(context.Background(), "k", "", 0, noResult(lockSucceed))
		if res.outcome != processed || !res.tookOver {
			t.Fatalf("after lock expiry: %v took over=%v (%v), want processed by takeover", res.outcome, res.tookOver, res.err)
		}
	})
}

func TestLockExpiredCompletionCountsAsAbsent(t *testing.T) {
	lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
		l := e.locker(t, e.store)
		if res := l.do(context.Background(), "k", "", 0, noResult(lockSucceed)); res.outcome != processed {
			t.Fatal(res.err)
		}
		// Past the window but before TTL gets round to deleting the item.
		e.clock.Advance(time.Hour + time.Second)
		if _, ok := e.read(t, lockID("k")); !ok {
			t.Fatal("record vanished; the test needs it present past expiresAt")
		}
		runs := 0
		res := l.do(context.Background(), "k", "", 0, noResult(func(context.Context) error { runs++; return nil }))
		if res.outcome != processed || runs != 1 || !res.tookOver {
			t.Fatalf("after the window: %v ran %d took over=%v, want processed once by takeover", res.outcome, runs, res.tookOver)
		}
	})
}

func TestLockFailedHandlerReleasesLockForImmediateRetry(t *testing.T) {
	lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
		l := e.locker(t, e.store)
		boom := errors.New("downstream 503")
		res := l.do(context.Background(), "k", "", 0, noResult(func(context.Context) error { return boom }))
		if res.outcome != failed || !errors.Is(res.err, boom) || res.releaseErr != nil {
			t.Fatalf("failing handler: %v err=%v release=%v", res.outcome, res.err, res.releaseErr)
		}
		if s := e.status(t, lockID("k")); s != store.StatusReleased {
			t.Fatalf("status %q, want RELEASED: the record keeps its fence", s)
		}
		if res := l.do(context.Background(), "k", "", 0, noResult(lockSucceed)); res.outcome != processed {
			t.Fatalf("retry after release: %v (%v)", res.outcome, res.err)
		}
	})
}

func TestLockKeysArePrefixedSoConsumersCanShareATable(t *testing.T) {
	lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
		other := e.locker(t, e.newStore(), func(c *Config) { c.KeyPrefix = "emails-fn" })
		for _, l := range []*locker{e.locker(t, e.store), other} {
			if res := l.do(context.Background(), "same-key", "", 0, noResult(lockSucceed)); res.outcome != processed {
				t.Fatalf("prefix consumer: %v (%v), want processed: prefixes must not collide", res.outcome, res.err)
			}
		}
		for _, id := range []string{"orders-fn#same-key", "emails-fn#same-key"} {
			if _, ok := e.read(t, id); !ok {
				t.Errorf("no record %s", id)
			}
		}
	})
}

func TestLockLength(t *testing.T) {
	lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
		now := e.clock.Now()
		deadline := now.Add(40 * time.Second)
		tests := []struct {
			name        string
			lockTimeout time.Duration
			deadline    bool
			want        time.Time
		}{
			{"LockTimeout wins", 2 * time.Minute, true, now.Add(2 * time.Minute)},
			{"invocation deadline plus margin", 0, true, deadline.Add(deadlineMargin)},
			{"never open-ended", 0, false, now.Add(noDeadlineLock)},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				l := e.locker(t, e.store, func(c *Config) { c.LockTimeout = tt.lockTimeout })
				ctx := context.Background()
				if tt.deadline {
					// A deadline in the real future, so a store call is not
					// cut short; the locker reads it against the test clock.
					var cancel context.CancelFunc
					ctx, cancel = context.WithDeadline(ctx, deadline)
					defer cancel()
				}
				var rec store.Record
				l.do(ctx, tt.name, "", 0, noResult(func(context.Context) error { rec, _ = e.read(t, lockID(tt.name)); return nil }))
				if got := rec.LockExpiresAt.UnixMilli(); got != tt.want.UnixMilli() {
					t.Errorf("lockExpiresAt = %d, want %d", got, tt.want.UnixMilli())
				}
			})
		}
	})
}

func TestStoreStaleHolderCannotCompleteOrRelease(t *testing.T) {
	lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
		ctx := context.Background()
		stale := e.acquire(t, e.store, "stale", "k", "", time.Second)
		e.clock.Advance(2 * time.Second)
		fresh := e.acquire(t, e.store, "fresh", "k", "", time.Minute)
		if !fresh.TookOver {
			t.Errorf("takeover of an expired lock: %+v, want TookOver", fresh)
		}

		if err := e.store.Complete(ctx, stale, store.Completion{Until: e.clock.Now().Add(time.Hour)}); !errors.Is(err, ErrLockLost) {
			t.Errorf("stale complete: %v, want ErrLockLost", err)
		}
		if err := e.store.Release(ctx, stale, e.clock.Now()); !errors.Is(err, ErrLockLost) {
			t.Errorf("stale release: %v, want ErrLockLost", err)
		}
		if _, err := e.store.Renew(ctx, stale, e.clock.Now().Add(time.Minute)); !errors.Is(err, ErrLockLost) {
			t.Errorf("stale renew: %v, want ErrLockLost", err)
		}
		rec, _ := e.read(t, lockID("k"))
		if rec.Owner != fresh.Owner {
			t.Fatalf("owner = %s, want the new holder %s", rec.Owner, fresh.Owner)
		}
		if rec.Status != store.StatusProcessing {
			t.Errorf("status = %s: the stale holder overwrote the new holder's record", rec.Status)
		}
		if err := e.store.Complete(ctx, fresh, store.Completion{Until: e.clock.Now().Add(time.Hour)}); err != nil {
			t.Errorf("new holder's complete: %v", err)
		}
	})
}
