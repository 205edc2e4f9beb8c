package dedupe_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/internal/dedupe"
)

func TestTheSameKeyWithAnotherPayloadIsAConflict(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if res := b.guard.DoPayload(ctx, "k", "hash-A", succeed); res.Outcome != dedupe.Processed {
		t.Fatal(res.Err)
	}
	tests := []struct {
		hash string
		want dedupe.Outcome
	}{
		{"hash-A", dedupe.Duplicate},
		{"hash-B", dedupe.PayloadMismatch},
		{"", dedupe.Duplicate}, // a caller that does not validate
	}
	for _, tt := range tests {
		res := b.guard.DoPayload(ctx, "k", tt.hash, func(context.Context) error { t.Error("ran"); return nil })
		if res.Outcome != tt.want || (tt.want == dedupe.PayloadMismatch) != errors.Is(res.Err, dedupe.ErrPayloadMismatch) {
			t.Errorf("hash %q: %v (%v), want %v", tt.hash, res.Outcome, res.Err, tt.want)
		}
	}

	// In progress for another payload is a conflict too.
	if _, err := b.store.AcquirePayload(ctx, "busy", "hash-A", b.clock.Now(), b.clock.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if res := b.guard.DoPayload(ctx, "busy", "hash-B", succeed); res.Outcome != dedupe.PayloadMismatch {
		t.Errorf("in progress, other payload: %v, want payload-mismatch", res.Outcome)
	}

	// A takeover after the window does not inherit the old payload's hash.
	b.clock.Advance(time.Hour + time.Second)
	if res := b.guard.DoPayload(ctx, "k", "", succeed); res.Outcome != dedupe.Processed {
		t.Fatalf("after the window: %v", res.Outcome)
	}
	if res := b.guard.DoPayload(ctx, "k", "hash-B", succeed); res.Outcome != dedupe.Duplicate {
		t.Errorf("new completion without a hash compared to hash-B: %v, want duplicate", res.Outcome)
	}
}

func TestAWarmCacheAnswersRepeatedDuplicatesWithoutATableCall(t *testing.T) {
	t.Parallel()
	b := setup(t)
	calls := &countingWriter{DynamoAPI: b.writer}
	g := b.newGuard(dedupe.NewStore(calls, b.table, "orders-fn"))
	g.Cache = dedupe.NewCompletedCache(10)
	ctx := context.Background()
	step := func(name, hash string, want dedupe.Outcome, wantCalls int32, cached bool) {
		t.Helper()
		calls.calls.Store(0)
		res := g.DoPayload(ctx, "k", hash, succeed)
		if res.Outcome != want || calls.calls.Load() != wantCalls || res.Cached != cached {
			t.Errorf("%s: %v after %d table calls (cached %v), want %v after %d (cached %v)",
				name, res.Outcome, calls.calls.Load(), res.Cached, want, wantCalls, cached)
		}
	}
	step("new", "h", dedupe.Processed, 2, false)
	step("duplicate", "h", dedupe.Duplicate, 0, true)
	step("other payload", "x", dedupe.PayloadMismatch, 0, true)
	b.clock.Advance(time.Hour + time.Second) // the window has ended
	step("after the window", "h", dedupe.Processed, 2, false)

	// Another instance's completion, learnt from one refused acquire.
	other := b.newGuard(dedupe.NewStore(calls, b.table, "orders-fn"))
	other.Cache = dedupe.NewCompletedCache(10)
	calls.calls.Store(0)
	if res := other.Do(ctx, "k", succeed); res.Outcome != dedupe.Duplicate || res.Cached || calls.calls.Load() != 1 {
		t.Errorf("cold: %+v after %d calls, want a duplicate from the table", res, calls.calls.Load())
	}
	if res := other.Do(ctx, "k", succeed); res.Outcome != dedupe.Duplicate || !res.Cached {
		t.Errorf("warm: %+v, want a cached duplicate", res)
	}
}
