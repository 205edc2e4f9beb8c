package sqsonce_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/sqsonce"
)

func TestLockTheSameKeyWithAnotherPayloadIsAConflict(t *testing.T) {
	lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
		ctx := context.Background()
		l := e.locker(t, e.store)
		if res := l.DoPayload(ctx, "k", "hash-A", lockSucceed); res.Outcome != sqsonce.LockProcessed {
			t.Fatal(res.Err)
		}
		tests := []struct {
			hash string
			want sqsonce.LockOutcome
		}{
			{"hash-A", sqsonce.LockDuplicate},
			{"hash-B", sqsonce.LockPayloadMismatch},
			{"", sqsonce.LockDuplicate}, // a caller that does not validate
		}
		for _, tt := range tests {
			res := l.DoPayload(ctx, "k", tt.hash, func(context.Context) error { t.Error("ran"); return nil })
			if res.Outcome != tt.want || (tt.want == sqsonce.LockPayloadMismatch) != errors.Is(res.Err, sqsonce.ErrPayloadMismatch) {
				t.Errorf("hash %q: %v (%v), want %v", tt.hash, res.Outcome, res.Err, tt.want)
			}
		}

		// In progress for another payload is a conflict too.
		e.acquire(t, e.store, "busy-holder", "busy", "hash-A", time.Minute)
		if res := l.DoPayload(ctx, "busy", "hash-B", lockSucceed); res.Outcome != sqsonce.LockPayloadMismatch {
			t.Errorf("in progress, other payload: %v, want payload-mismatch", res.Outcome)
		}

		// A takeover after the window does not inherit the old payload's hash.
		e.clock.Advance(time.Hour + time.Second)
		if res := l.DoPayload(ctx, "k", "", lockSucceed); res.Outcome != sqsonce.LockProcessed {
			t.Fatalf("after the window: %v", res.Outcome)
		}
		if res := l.DoPayload(ctx, "k", "hash-B", lockSucceed); res.Outcome != sqsonce.LockDuplicate {
			t.Errorf("new completion without a hash compared to hash-B: %v, want duplicate", res.Outcome)
		}
	})
}

func TestLockAWarmCacheAnswersRepeatedDuplicatesWithoutATableCall(t *testing.T) {
	lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
		withCache := func(c *sqsonce.Config) { c.LocalCache = 10 }
		l := e.locker(t, e.store, withCache)
		ctx := context.Background()
		step := func(name, hash string, want sqsonce.LockOutcome, wantCalls int32, cached bool) {
			t.Helper()
			e.calls.Store(0)
			res := l.DoPayload(ctx, "k", hash, lockSucceed)
			if res.Outcome != want || e.calls.Load() != wantCalls || res.Cached != cached {
				t.Errorf("%s: %v after %d table calls (cached %v), want %v after %d (cached %v)",
					name, res.Outcome, e.calls.Load(), res.Cached, want, wantCalls, cached)
			}
		}
		step("new", "h", sqsonce.LockProcessed, 2, false)
		step("duplicate", "h", sqsonce.LockDuplicate, 0, true)
		step("other payload", "x", sqsonce.LockPayloadMismatch, 0, true)
		e.clock.Advance(time.Hour + time.Second) // the window has ended
		step("after the window", "h", sqsonce.LockProcessed, 2, false)

		// Another instance's completion, learnt from one refused acquire.
		other := e.locker(t, e.newStore(), withCache)
		e.calls.Store(0)
		if res := other.Do(ctx, "k", lockSucceed); res.Outcome != sqsonce.LockDuplicate || res.Cached || e.calls.Load() != 1 {
			t.Errorf("cold: %+v after %d calls, want a duplicate from the table", res, e.calls.Load())
		}
		if res := other.Do(ctx, "k", lockSucceed); res.Outcome != sqsonce.LockDuplicate || !res.Cached {
			t.Errorf("warm: %+v, want a cached duplicate", res)
		}
	})
}
