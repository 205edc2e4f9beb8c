package sqsonce_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/sqsonce"
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
		want    sqsonce.LockOutcome
		status  store.Status
	}{
		{"success completes", nil, sqsonce.LockProcessed, store.StatusCompleted},
		{"failure releases", errors.New("consumer failed"), sqsonce.LockFailed, store.StatusReleased},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
				l := e.locker(t, e.store)
				h, res := l.Acquire(ctx, "k", "")
				if h == nil {
					t.Fatalf("Acquire: %v (%v)", res.Outcome, res.Err)
				}
				key, fence := sqsonce.Key(h.Context()), sqsonce.Fence(h.Context())
				if key != "k" || fence != h.Lease().Fence || fence < e.firstFence() {
					t.Errorf("work context key %q fence %d, hold lease %+v", key, fence, h.Lease())
				}
				if _, held := l.Acquire(ctx, "k", ""); held.Outcome != sqsonce.LockInProgress {
					t.Errorf("second Acquire while held: %v, want in-progress", held.Outcome)
				}
				got := h.Finish(ctx, tt.workErr)
				if got.Outcome != tt.want || got.Fence != fence {
					t.Errorf("Finish: %v fence %d (%v), want %v fence %d", got.Outcome, got.Fence, got.Err, tt.want, fence)
				}
				if s := e.status(t, lockID("k")); s != tt.status {
					t.Errorf("status %s, want %s", s, tt.status)
				}
				if h.Context().Err() == nil {
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
		h, res := l.Acquire(ctx, "k", "")
		if h == nil {
			t.Fatalf("Acquire: %v (%v)", res.Outcome, res.Err)
		}
		lease := h.Abandon()
		if s := e.status(t, lockID("k")); s != store.StatusProcessing {
			t.Fatalf("status %s after Abandon, want %s", s, store.StatusProcessing)
		}
		if _, again := l.Acquire(ctx, "k", ""); again.Outcome != sqsonce.LockInProgress {
			t.Fatalf("Acquire before expiry: %v, want in-progress", again.Outcome)
		}
		e.clock.Advance(lease.LockExpiresAt.Sub(e.clock.Now()) + time.Millisecond)
		next, res := l.Acquire(ctx, "k", "")
		if next == nil {
			t.Fatalf("Acquire after expiry: %v (%v)", res.Outcome, res.Err)
		}
		if got := next.Finish(ctx, nil); got.Outcome != sqsonce.LockProcessed || !got.TookOver || got.Fence <= lease.Fence {
			t.Errorf("after expiry: %v took over %v fence %d, want processed by takeover with a fence above %d", got.Outcome, got.TookOver, got.Fence, lease.Fence)
		}
	})
}
