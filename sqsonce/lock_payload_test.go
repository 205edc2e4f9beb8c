package sqsonce

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestLockTheSameKeyWithAnotherPayloadIsAConflict(t *testing.T) {
	lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
		ctx := context.Background()
		l := e.locker(t, e.store)
		if res := l.do(ctx, "k", "hash-A", 0, noResult(lockSucceed)); res.outcome != processed {
			t.Fatal(res.err)
		}
		tests := []struct {
			hash string
			want lockOutcome
		}{
			{"hash-A", duplicate},
			{"hash-B", payloadMismatch},
			{"", duplicate}, // a caller that does not validate
		}
		for _, tt := range tests {
			res := l.do(ctx, "k", tt.hash, 0, noResult(func(context.Context) error { t.Error("ran"); return nil }))
			if res.outcome != tt.want || (tt.want == payloadMismatch) != errors.Is(res.err, ErrPayloadMismatch) {
				t.Errorf("hash %q: %v (%v), want %v", tt.hash, res.outcome, res.err, tt.want)
			}
		}

		// In progress for another payload is a conflict too.
		e.acquire(t, e.store, "busy-holder", "busy", "hash-A", time.Minute)
		if res := l.do(ctx, "busy", "hash-B", 0, noResult(lockSucceed)); res.outcome != payloadMismatch {
			t.Errorf("in progress, other payload: %v, want payload-mismatch", res.outcome)
		}

		// A takeover after the window does not inherit the old payload's hash.
		e.clock.Advance(time.Hour + time.Second)
		if res := l.do(ctx, "k", "", 0, noResult(lockSucceed)); res.outcome != processed {
			t.Fatalf("after the window: %v", res.outcome)
		}
		if res := l.do(ctx, "k", "hash-B", 0, noResult(lockSucceed)); res.outcome != duplicate {
			t.Errorf("new completion without a hash compared to hash-B: %v, want duplicate", res.outcome)
		}
	})
}

func TestLockAWarmCacheAnswersRepeatedDuplicatesWithoutATableCall(t *testing.T) {
	lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
		withCache := func(c *Config) { c.LocalCache = 10 }
		l := e.locker(t, e.store, withCache)
		ctx := context.Background()
		step := func(name, hash string, want lockOutcome, wantCalls int32, cached bool) {
			t.Helper()
			e.calls.Store(0)
			res := l.do(ctx, "k", hash, 0, noResult(lockSucceed))
			if res.outcome != want || e.calls.Load() != wantCalls || res.cached != cached {
				t.Errorf("%s: %v after %d table calls (cached %v), want %v after %d (cached %v)",
					name, res.outcome, e.calls.Load(), res.cached, want, wantCalls, cached)
			}
		}
		step("new", "h", processed, 2, false)
		step("duplicate", "h", duplicate, 0, true)
		step("other payload", "x", payloadMismatch, 0, true)
		e.clock.Advance(time.Hour + time.Second) // the window has ended
		step("after the window", "h", processed, 2, false)

		// Another instance's completion, learnt from one refused acquire.
		other := e.locker(t, e.newStore(), withCache)
		e.calls.Store(0)
		if res := other.do(ctx, "k", "", 0, noResult(lockSucceed)); res.outcome != duplicate || res.cached || e.calls.Load() != 1 {
			t.Errorf("cold: %+v after %d calls, want a duplicate from the table", res, e.calls.Load())
		}
		if res := other.do(ctx, "k", "", 0, noResult(lockSucceed)); res.outcome != duplicate || !res.cached {
			t.Errorf("warm: %+v, want a cached duplicate", res)
		}
	})
}
