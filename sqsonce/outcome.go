package sqsonce

import (
	"context"
	"errors"
	"time"
)

// Outcome is what happened to one record of a batch, or to one call of Do
// or DoResult: what Config.OnOutcome receives, and what the processor's
// metrics count (each metric is a count of Outcomes).
type Outcome struct {
	// Kind is what happened; its value is the name of the metric that
	// counts it.
	Kind Kind
	// Reason says why, for KindFailed and KindForwardedToOperator; empty
	// otherwise. It is the metric's Reason dimension.
	Reason Reason
	// Key is the idempotency key, or its HashKey with Config.HashKeys; empty
	// for a record without one (ReasonNoKey).
	Key string
	// MessageID is the SQS message's id; empty for Do and DoResult.
	MessageID string
	// Fence is the fencing token of the lock the work ran under; 0 when it
	// did not run.
	Fence int64
	// Err is the error behind Kind: the handler's, the store's, or the
	// refusal (matching ErrDuplicate, ErrInProgress or ErrPayloadMismatch);
	// nil for KindProcessed.
	Err error
	// LockLost: the lock was taken over, or could not be renewed, while the
	// work ran (the metric LockLost counts these).
	LockLost bool
	// TookOver: the lock replaced an expired lock or an ended window.
	TookOver bool
	// Cached: the local cache answered (Config.LocalCache), with no store
	// call.
	Cached bool
	// Waited is how long Do or DoResult waited for another holder
	// (Config.WaitInProgress).
	Waited time.Duration
	// BackoffApplied: SQS confirmed the failure backoff of this record
	// (the metric BackoffApplied counts these).
	BackoffApplied bool
	// InProgressHidden: SQS confirmed the hiding of this record until the
	// lock that refused it can be taken over (the metric InProgressHidden
	// counts these).
	InProgressHidden bool
	// Duration is how long the record or call took, from its start to its
	// outcome. For records a Target receives as one batch, it is the
	// batch's time.
	Duration time.Duration
}

// Kind is what happened to a record or a call. Each record, and each call
// of Do, has exactly one; its value is the name of the CloudWatch metric
// (namespace sqs-once, dimension FunctionName) that counts it, so that
// OnOutcome and the metrics count alike. The README's "Metrics" section
// says what each means for the guarantee.
type Kind string

const (
	// KindProcessed: the handler, the target or Do's function succeeded
	// and the key is COMPLETED.
	KindProcessed Kind = "Processed"
	// KindUnrecordedCompletion: the work succeeded but its completion
	// could not be recorded (the write failed, or the lock was lost): a
	// later delivery or call of the key may run it again. Do returns nil.
	KindUnrecordedCompletion Kind = "UnrecordedCompletion"
	// KindDuplicate: the key had completed; the work did not run (Do
	// returns an error matching ErrDuplicate, DoResult the stored result).
	KindDuplicate Kind = "Duplicate"
	// KindInProgress: another holder had the key's live lock; the work did
	// not run. The record is retried; Do returns an error matching
	// ErrInProgress.
	KindInProgress Kind = "InProgress"
	// KindInProgressDropped: a record as KindInProgress, but deleted
	// unprocessed (Config.InProgress is InProgressDrop). Handle only.
	KindInProgressDropped Kind = "InProgressDropped"
	// KindForwardedToOperator: the operator queue accepted the record
	// (Config.OperatorQueueURL), which is then deleted; Reason is the
	// sqs-once-reason it carries. Handle only.
	KindForwardedToOperator Kind = "ForwardedToOperator"
	// KindFailed: the record was reported failed, to be redelivered; Do
	// returned its function's error, or did not run it. Reason says why.
	KindFailed Kind = "Failed"
)

// Reason is why a record or call is KindFailed or KindForwardedToOperator:
// the metrics' Reason dimension, and for a forwarded record its
// sqs-once-reason attribute.
type Reason string

const (
	// ReasonHandlerError (KindFailed): the handler, the target or Do's
	// function returned an error; without an operator queue, a Permanent
	// one and a target's refusal too.
	ReasonHandlerError Reason = "handler-error"
	// ReasonLockLost (KindFailed): the lock was lost while the work ran,
	// which then failed.
	ReasonLockLost Reason = "lock-lost"
	// ReasonStoreUnavailable (KindFailed): the store failed, throttled or
	// did not answer; the work did not run.
	ReasonStoreUnavailable Reason = "store-unavailable"
	// ReasonStoreMisconfigured (KindFailed): the table is missing, denied,
	// of another schema, or holds a foreign record; the work did not run.
	ReasonStoreMisconfigured Reason = "store-misconfigured"
	// ReasonNoKey (KindFailed): the record has no idempotency key, or Do
	// got a key it cannot lock (ErrNoKey).
	ReasonNoKey Reason = "no-key"
	// ReasonPayloadMismatch: the key was seen with another body
	// (Config.ValidatePayload). KindForwardedToOperator with an operator
	// queue, KindFailed without one.
	ReasonPayloadMismatch Reason = "payload-mismatch"
	// ReasonPermanent (KindForwardedToOperator): the Handler marked its
	// failure Permanent.
	ReasonPermanent Reason = "permanent-error"
	// ReasonTargetRefused (KindForwardedToOperator): the target refused the
	// record for a reason no retry fixes (access denied, no such
	// destination, too large).
	ReasonTargetRefused Reason = "target-refused"
	// ReasonForwardFailed (KindFailed): the operator queue did not accept
	// a record bound for it.
	ReasonForwardFailed Reason = "forward-failed"
	// ReasonNotStarted (KindFailed): the record was not started, the
	// invocation's time kept for the batch's last calls.
	ReasonNotStarted Reason = "not-started"
	// ReasonGroupBlocked (KindFailed): an earlier record of its FIFO
	// message group failed.
	ReasonGroupBlocked Reason = "group-blocked"
	// ReasonDeliveryUnknown (KindFailed): the target's answer was lost; the
	// lock is kept until it expires.
	ReasonDeliveryUnknown Reason = "delivery-unknown"
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
	default:
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
