package sqsonce

import (
	"errors"
	"fmt"
	"testing"
)

// TestClassifyEveryLockResult: each thing the lock can do is one Kind and
// Reason, the one Handle starts from and Do reports; a Reason goes with
// KindFailed only, and the lock's flags carry over.
func TestClassifyEveryLockResult(t *testing.T) {
	boom := errors.New("boom")
	for _, tt := range []struct {
		res    lockResult
		kind   Kind
		reason Reason
	}{
		{lockResult{outcome: processed, fence: 7, tookOver: true}, KindProcessed, ""},
		{lockResult{outcome: processedUnrecorded, err: fmt.Errorf("%w: expired", ErrLockLost)}, KindUnrecordedCompletion, ""},
		{lockResult{outcome: duplicate, err: ErrDuplicate, cached: true}, KindDuplicate, ""},
		{lockResult{outcome: inProgress, err: ErrInProgress}, KindInProgress, ""},
		{lockResult{outcome: payloadMismatch, err: ErrPayloadMismatch}, KindFailed, ReasonPayloadMismatch},
		{lockResult{outcome: failed, err: boom}, KindFailed, ReasonHandlerError},
		{lockResult{outcome: failed, err: boom, lockLost: true}, KindFailed, ReasonLockLost},
		{lockResult{outcome: notAcquired, err: fmt.Errorf("%w: throttled", ErrUnavailable)}, KindFailed, ReasonStoreUnavailable},
		{lockResult{outcome: notAcquired, err: fmt.Errorf("%w: no table", ErrMisconfigured)}, KindFailed, ReasonStoreMisconfigured},
		{lockResult{}, KindFailed, ReasonStoreUnavailable}, // nothing known: never a success
	} {
		t.Run(tt.res.outcome.String(), func(t *testing.T) {
			o := classify(tt.res)
			if o.Kind != tt.kind || o.Reason != tt.reason {
				t.Errorf("classify(%+v) = %s/%s, want %s/%s", tt.res, o.Kind, o.Reason, tt.kind, tt.reason)
			}
			lost := tt.res.lockLost || errors.Is(tt.res.err, ErrLockLost)
			if o.Err != tt.res.err || o.Fence != tt.res.fence || o.TookOver != tt.res.tookOver || o.Cached != tt.res.cached || o.LockLost != lost {
				t.Errorf("classify(%+v) = %+v: the lock's detail not carried over", tt.res, o)
			}
		})
	}
}

// TestARecordIsDeletedOnlyForAKindThatSaysSo: the batch response lists
// every record whose Kind does not settle it, one nothing decided too.
func TestARecordIsDeletedOnlyForAKindThatSaysSo(t *testing.T) {
	for kind, want := range map[Kind]bool{
		KindProcessed: false, KindUnrecordedCompletion: false, KindDuplicate: false, KindAlreadyStarted: false, KindInProgressDropped: false,
		KindForwardedToOperator: false, KindInProgress: true, KindFailed: true, "": true,
	} {
		o := outcome{Outcome: Outcome{Kind: kind}}
		if o.retried() != want {
			t.Errorf("Kind %q: retried %v, want %v", kind, o.retried(), want)
		}
		if o.settled() && (o.retried() || kind == KindForwardedToOperator) {
			t.Errorf("Kind %q: settled, yet retried or bound for the operator queue", kind)
		}
	}
}
