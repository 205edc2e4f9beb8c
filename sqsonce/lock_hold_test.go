package sqsonce

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// Acquire, then Finish, is Do in two steps: work done between them (one
// delivery for a batch of keys) has the same guarantee.
func TestLockHoldFinish(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tt := range []struct {
		name    string
		workErr error
		want    lockOutcome
		status  store.Status
	}{
		{"success completes", nil, processed, store.StatusCompleted},
		{"failure releases", errors.New("consumer failed"), failed, store.StatusReleased},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
				l := e.locker(t, e.store)
				h, res := l.acquire(ctx, "k", "")
				if h == nil {
					t.Fatalf("Acquire: %v (%v)", res.outcome, res.err)
				}
				key, fence := Key(h.ctx), Fence(h.ctx)
				if key != "k" || fence != h.lease.Fence || fence < e.firstFence() {
					t.Errorf("work context key %q fence %d, hold lease %+v", key, fence, h.lease)
				}
				if _, held := l.acquire(ctx, "k", ""); held.outcome != inProgress {
					t.Errorf("second Acquire while held: %v, want in-progress", held.outcome)
				}
				got := h.finish(ctx, nil, tt.workErr)
				if got.outcome != tt.want || got.fence != fence {
					t.Errorf("Finish: %v fence %d (%v), want %v fence %d", got.outcome, got.fence, got.err, tt.want, fence)
				}
				if s := e.status(t, lockID("k")); s != tt.status {
					t.Errorf("status %s, want %s", s, tt.status)
				}
				if h.ctx.Err() == nil {
					t.Error("the work context is still live after Finish")
				}
			})
		})
	}
}

// Abandon writes nothing: the lock stays until it expires, so a redelivery
// meanwhile is in progress, and afterwards it is taken over with a larger
// fence.
func TestLockHoldAbandonKeepsTheLockUntilItExpires(t *testing.T) {
	lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
		ctx := context.Background()
		l := e.locker(t, e.store)
		h, res := l.acquire(ctx, "k", "")
		if h == nil {
			t.Fatalf("Acquire: %v (%v)", res.outcome, res.err)
		}
		lease := h.abandon()
		if s := e.status(t, lockID("k")); s != store.StatusProcessing {
			t.Fatalf("status %s after Abandon, want %s", s, store.StatusProcessing)
		}
		if _, again := l.acquire(ctx, "k", ""); again.outcome != inProgress {
			t.Fatalf("Acquire before expiry: %v, want in-progress", again.outcome)
		}
		e.clock.Advance(lease.LockExpiresAt.Sub(e.clock.Now()) + time.Millisecond)
		next, res := l.acquire(ctx, "k", "")
		if next == nil {
			t.Fatalf("Acquire after expiry: %v (%v)", res.outcome, res.err)
		}
		if got := next.finish(ctx, nil, nil); got.outcome != processed || !got.tookOver || got.fence <= lease.Fence {
			t.Errorf("after expiry: %v took over %v fence %d, want processed by takeover with a fence above %d", got.outcome, got.tookOver, got.fence, lease.Fence)
		}
	})
}
