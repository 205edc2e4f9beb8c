package sqsonce

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

func TestLockFenceGrowsWithEveryAcquisition(t *testing.T) {
	lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
		ctx := context.Background()
		l := e.locker(t, e.store)
		var seen []int64
		record := func(ctx context.Context) error {
			if key := Key(ctx); key != "k" {
				t.Errorf("fn's context has key %q, want the key's lease", key)
			}
			seen = append(seen, Fence(ctx))
			return nil
		}

		// First acquisition, abandoned (its holder crashed): a new record's
		// fence starts from the clock.
		f1 := e.firstFence()
		if first := e.acquire(t, e.store, "crashed", "k", "", time.Second); first.Fence != f1 {
			t.Fatalf("first acquire: fence %d; want %d", first.Fence, f1)
		}
		// Takeover of the expired lock.
		e.clock.Advance(2 * time.Second)
		res := l.do(ctx, "k", "", 0, noResult(record))
		if res.outcome != processed || res.fence != f1+1 {
			t.Fatalf("takeover: %v fence %d (%v); want processed with fence %d", res.outcome, res.fence, res.err, f1+1)
		}
		// Takeover of a completion whose window ended, before TTL deleted it.
		e.clock.Advance(time.Hour + time.Second)
		if res := l.do(ctx, "k", "", 0, noResult(record)); res.outcome != processed || res.fence != f1+2 {
			t.Fatalf("after the window: %v fence %d; want processed with fence %d", res.outcome, res.fence, f1+2)
		}
		if len(seen) != 2 || seen[0] != f1+1 || seen[1] != f1+2 {
			t.Errorf("fn saw fences %v, want [%d %d]", seen, f1+1, f1+2)
		}
		// A failure releases the lock but keeps the record: the retry's fence
		// is still one more, never back to a smaller number.
		e.clock.Advance(time.Hour + time.Second)
		l.do(ctx, "k", "", 0, noResult(func(context.Context) error { return errors.New("fails") }))
		if res := l.do(ctx, "k", "", 0, noResult(record)); res.fence != f1+4 {
			t.Errorf("after a release: fence %d, want %d", res.fence, f1+4)
		}
	})
}

// TestStoreFenceGrowsAcrossTheRecordsDeletion: TTL deletes a record only
// after every holder of it is gone, and a new record's fence starts from
// the clock, above every fence of the old one; a counter restarting at 1
// would let a downstream store accept a stale holder, or refuse every new
// one.
func TestStoreFenceGrowsAcrossTheRecordsDeletion(t *testing.T) {
	lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
		for range 3 { // takeovers push the old record's fence up
			e.acquire(t, e.store, "crashed", "k", "", time.Second)
			e.clock.Advance(2 * time.Second)
		}
		old := e.acquire(t, e.store, "last", "k", "", time.Second)
		// What TTL does, FenceRetention after the lock ended.
		e.clock.Advance(time.Second + store.FenceRetention)
		e.remove(t, lockID("k"))
		if renewed := e.acquire(t, e.store, "new", "k", "", time.Second); renewed.Fence <= old.Fence {
			t.Errorf("fence after the record was deleted: %d, want above the old record's %d", renewed.Fence, old.Fence)
		}
	})
}

func TestLockOnlyAnExplicitSuccessCompletes(t *testing.T) {
	lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
		l := e.locker(t, e.store)
		tests := []struct {
			name    string
			fn      func(context.Context) error
			wantErr func(error) bool
		}{
			{"runtime.Goexit, as t.FailNow calls it", func(context.Context) error { runtime.Goexit(); return nil },
				func(err error) bool { return errors.Is(err, ErrExited) }},
			{"panic", func(context.Context) error { panic("boom") },
				func(err error) bool { var p *PanicError; return errors.As(err, &p) && p.Value == "boom" }},
			{"panic(nil)", func(context.Context) error { panic(nil) },
				func(err error) bool { var p *PanicError; return errors.As(err, &p) }},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				res := l.do(context.Background(), tt.name, "", 0, noResult(tt.fn))
				if res.outcome != failed || !tt.wantErr(res.err) || res.releaseErr != nil {
					t.Fatalf("outcome %v, err %v, release %v: an odd exit must be a failure that releases the lock", res.outcome, res.err, res.releaseErr)
				}
				if s := e.status(t, lockID(tt.name)); s != store.StatusReleased {
					t.Errorf("status %q: the lock was not released", s)
				}
			})
		}
	})
}

func TestStoreReleaseOfARecordDeletedByHandSucceeds(t *testing.T) {
	lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
		lease := e.acquire(t, e.store, "holder", "k", "", time.Minute)
		// What a retried release meets when an operator deleted the record
		// (or a first attempt of a delete was applied).
		e.remove(t, lockID("k"))
		if err := e.store.Release(context.Background(), lease, e.clock.Now()); err != nil {
			t.Errorf("release of a deleted lock: %v, want success: the key is free", err)
		}
	})
}
