package sqsonce

import (
	"context"
	"errors"
	"time"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// Outcome is what happened to one record, or one call of Do or DoResult:
// what Config.OnOutcome receives and the metrics count.
type Outcome struct {
	// Kind is what happened: the metric.
	Kind Kind
	// Reason is why (KindFailed and KindForwardedToOperator only): the
	// metric's Reason dimension.
	Reason Reason
	// Key is the key (its HashKey with Config.HashKeys).
	Key string
	// MessageID is the record's message id (empty for Do).
	MessageID string
	// Fence is the lock's fencing token; 0 when the work did not run.
	Fence int64
	// Err is the handler's, the store's or the refusal's error; nil for
	// KindProcessed.
	Err error
	// LockLost: the lock was taken over or not renewed while the work ran.
	// TookOver: the lock replaced an expired one or an ended window.
	// Cached: Config.LocalCache answered, with no store call.
	LockLost, TookOver, Cached bool
	// Waited is how long Do waited for another holder (WaitInProgress).
	Waited time.Duration
	// BackoffApplied and InProgressHidden: SQS confirmed the record's
	// failure backoff, or its hiding until the refusing lock can be taken
	// over.
	BackoffApplied, InProgressHidden bool
	// Duration is the record's or call's time (a Target's batch's, for its
	// records).
	Duration time.Duration
}

// Kind is what happened to a record or a call: exactly one per record and
// per Do, its value the name of the CloudWatch metric that counts it
// (docs/metrics.md says what each means for the guarantee).
type Kind string

const (
	// KindProcessed: the work succeeded and the key is COMPLETED.
	KindProcessed Kind = "Processed"
	// KindUnrecordedCompletion: the work succeeded but its completion was
	// not recorded: a later delivery may run it again. Do returns nil.
	KindUnrecordedCompletion Kind = "UnrecordedCompletion"
	// KindDuplicate: the key had completed; the work did not run (Do:
	// ErrDuplicate; DoResult: the stored result).
	KindDuplicate Kind = "Duplicate"
	// KindInProgress: another holder had the key's live lock; the work did
	// not run (the record is retried; Do: ErrInProgress).
	KindInProgress Kind = "InProgress"
	// KindAlreadyStarted: the Target already held the key's named
	// execution for the same payload (ErrAlreadyStarted): started by an
	// earlier delivery whose completion was not written. The key is
	// completed now; nothing was started again.
	KindAlreadyStarted Kind = "AlreadyStarted"
	// KindInProgressDropped: a record in progress elsewhere, deleted
	// (InProgressDrop).
	KindInProgressDropped Kind = "InProgressDropped"
	// KindForwardedToOperator: the operator queue accepted the record,
	// which is deleted; Reason is its sqs-once-reason.
	KindForwardedToOperator Kind = "ForwardedToOperator"
	// KindFailed: the record is redelivered; Do returned fn's error or did
	// not run it. Reason says why.
	KindFailed Kind = "Failed"
)

// Reason is why a record or call is KindFailed or KindForwardedToOperator:
// the metrics' Reason dimension, and a forwarded record's sqs-once-reason.
type Reason string

const (
	// ReasonHandlerError: the work returned an error (without an operator
	// queue, a Permanent one and a target's refusal too).
	ReasonHandlerError Reason = "handler-error"
	// ReasonLockLost: the lock was lost while the work ran, which failed.
	ReasonLockLost Reason = "lock-lost"
	// ReasonStoreUnavailable: the store failed or did not answer.
	ReasonStoreUnavailable Reason = "store-unavailable"
	// ReasonStoreMisconfigured: the table is missing, denied, of another
	// schema, or holds a foreign record.
	ReasonStoreMisconfigured Reason = "store-misconfigured"
	// ReasonNoKey: the record has no key, or Do's key cannot be locked.
	ReasonNoKey Reason = "no-key"
	// ReasonPayloadMismatch: the key was seen with another body
	// (ValidatePayload): KindForwardedToOperator, or KindFailed without an
	// operator queue.
	ReasonPayloadMismatch Reason = "payload-mismatch"
	// ReasonPermanent (KindForwardedToOperator): the Handler returned
	// Permanent(err).
	ReasonPermanent Reason = "permanent-error"
	// ReasonTargetRefused (KindForwardedToOperator): the target refused
	// the record for good (ErrTargetRefused).
	ReasonTargetRefused Reason = "target-refused"
	// ReasonForwardFailed: the operator queue did not accept the record.
	ReasonForwardFailed Reason = "forward-failed"
	// ReasonNotStarted: not started: the invocation's remaining time is
	// kept for the batch's last calls.
	ReasonNotStarted Reason = "not-started"
	// ReasonGroupBlocked: an earlier record of its FIFO group failed.
	ReasonGroupBlocked Reason = "group-blocked"
	// ReasonDeliveryUnknown: the target's answer was lost
	// (ErrOutcomeUnknown); the lock is kept until it expires.
	ReasonDeliveryUnknown Reason = "delivery-unknown"
	// ReasonCommitUnknown: the work's transaction (a store.Transactor's),
	// or a completion that carries the work's emitted messages (Emit), was
	// sent and its outcome could not be settled (the answer lost, the
	// retries spent, the record unread): the lock is kept until
	// it expires, and the next delivery finds the key completed or runs
	// the work again; the effect is applied once either way.
	ReasonCommitUnknown Reason = "commit-unknown"
	// ReasonEmitPending: the key's work is committed (now, or by an
	// earlier delivery) but its emitted messages (Emit) are not all sent:
	// the record is retried, and the retry sends them, the work not run
	// again (ErrEmitPending).
	ReasonEmitPending Reason = "emit-pending"
	// ReasonNotCommitted: the work's transaction is known not to have
	// committed, and cannot be tried again as it was (store.ErrNotCommitted:
	// its connection gone, a serialization failure or deadlock): nothing
	// of the effect is applied, the lock is released, the work runs again.
	ReasonNotCommitted Reason = "not-committed"
)

// classify is the Outcome of what the lock did: the one reading of a
// lockResult, for Handle and Do alike. Handle then applies its batch's
// settings to it (judge); the caller sets Key, MessageID and Duration.
func classify(res lockResult) Outcome {
	o := Outcome{
		Fence:    res.fence,
		Err:      res.err,
		LockLost: res.lockLost || errors.Is(res.err, ErrLockLost),
		TookOver: res.tookOver,
		Cached:   res.cached,
		Waited:   res.waited,
	}
	switch res.outcome {
	case processed:
		o.Kind = KindProcessed
	case processedUnrecorded:
		o.Kind = KindUnrecordedCompletion
	case duplicate:
		o.Kind = KindDuplicate
	case inProgress:
		o.Kind = KindInProgress
	case payloadMismatch:
		o.Kind, o.Reason = KindFailed, ReasonPayloadMismatch
	case failed:
		o.Kind, o.Reason = KindFailed, ReasonHandlerError
		if res.lockLost {
			o.Kind, o.Reason = KindFailed, ReasonLockLost
		}
	case emitPending:
		o.Kind, o.Reason = KindFailed, ReasonEmitPending
	case uncommitted:
		o.Kind, o.Reason = KindFailed, ReasonCommitUnknown
		switch {
		case errors.Is(res.err, ErrMisconfigured):
			o.Reason = ReasonStoreMisconfigured
		case errors.Is(res.err, store.ErrNotCommitted):
			o.Reason = ReasonNotCommitted
		}
	default: // notAcquired
		o.Kind, o.Reason = KindFailed, ReasonStoreUnavailable
		if errors.Is(res.err, ErrMisconfigured) {
			o.Reason = ReasonStoreMisconfigured
		}
	}
	return o
}

// failedFor is the Outcome of a record or call that failed for reason
// before or outside the lock, err saying why (nil: the reason says it).
func failedFor(reason Reason, err error) Outcome {
	return Outcome{Kind: KindFailed, Reason: reason, Err: err}
}

// tell passes each Outcome to Config.OnOutcome.
func (p *Processor) tell(ctx context.Context, outs ...Outcome) {
	if p.cfg.OnOutcome == nil {
		return
	}
	for _, o := range outs {
		p.cfg.OnOutcome(ctx, o)
	}
}
