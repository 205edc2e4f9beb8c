package dedupe_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/internal/dedupe"
)

// Acquire, then Finish, is Do in two steps: work done between them (one
// delivery for a batch of keys) has the same guarantee.
func TestHoldFinish(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tt := range []struct {
		name    string
		workErr error
		want    dedupe.Outcome
		status  dedupe.Status
	}{
		{"success completes", nil, dedupe.Processed, dedupe.StatusCompleted},
		{"failure releases", errors.New("consumer failed"), dedupe.Failed, dedupe.StatusReleased},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := setup(t)
			h, res := b.guard.Acquire(ctx, "k", "")
			if h == nil {
				t.Fatalf("Acquire: %v (%v)", res.Outcome, res.Err)
			}
			lease, ok := dedupe.LeaseFrom(h.Context())
			if !ok || lease.Key != "k" || lease.Fence != h.Lease().Fence || lease.Fence < b.firstFence() {
				t.Errorf("work context lease %+v, hold lease %+v", lease, h.Lease())
			}
			if _, held := b.guard.Acquire(ctx, "k", ""); held.Outcome != dedupe.InProgress {
				t.Errorf("second Acquire while held: %v, want in-progress", held.Outcome)
			}
			got := h.Finish(ctx, tt.workErr)
			if got.Outcome != tt.want || got.Fence != lease.Fence {
				t.Errorf("Finish: %v fence %d (%v), want %v fence %d", got.Outcome, got.Fence, got.Err, tt.want, lease.Fence)
			}
			if s := dedupe.Status(b.status(t, "orders-fn#k")); s != tt.status {
				t.Errorf("status %s, want %s", s, tt.status)
			}
			if h.Context().Err() == nil {
				t.Error("the work context is still live after Finish")
			}
		})
	}
}

// Abandon writes nothing: the lock stays until it expires, so a redelivery
// meanwhile is in progress, and afterwards it is taken over with a larger
// fence.
func TestHoldAbandonKeepsTheLockUntilItExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	h, res := b.guard.Acquire(ctx, "k", "")
	if h == nil {
		t.Fatalf("Acquire: %v (%v)", res.Outcome, res.Err)
	}
	lease := h.Abandon()
	if s := dedupe.Status(b.status(t, "orders-fn#k")); s != dedupe.StatusProcessing {
		t.Fatalf("status %s after Abandon, want %s", s, dedupe.StatusProcessing)
	}
	if _, again := b.guard.Acquire(ctx, "k", ""); again.Outcome != dedupe.InProgress {
		t.Fatalf("Acquire before expiry: %v, want in-progress", again.Outcome)
	}
	b.clock.Advance(lease.LockExpiresAt.Sub(b.clock.Now()) + time.Millisecond)
	next, res := b.guard.Acquire(ctx, "k", "")
	if next == nil {
		t.Fatalf("Acquire after expiry: %v (%v)", res.Outcome, res.Err)
	}
	if got := next.Finish(ctx, nil); got.Outcome != dedupe.Processed || !got.TookOver || got.Fence <= lease.Fence {
		t.Errorf("after expiry: %v took over %v fence %d, want processed by takeover with a fence above %d", got.Outcome, got.TookOver, got.Fence, lease.Fence)
	}
}
