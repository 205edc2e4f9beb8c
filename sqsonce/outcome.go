package sqsonce

import (
	"context"
	"time"
)

// Outcome is what happened to one record of a batch, or to one call of Do
// or DoResult: what Config.OnOutcome receives, and what the processor's
// metrics count (each metric is a count of Outcomes).
type Outcome struct {
	// Kind is what happened, named as its metric: MetricProcessed,
	// MetricUnrecordedCompletion (the work ran, its completion was not
	// recorded: a duplicate is possible), MetricDuplicate,
	// MetricInProgress, MetricInProgressDropped, MetricForwardedToOperator
	// or MetricFailed.
	Kind string
	// Reason says why, for MetricFailed (a Failure constant) and
	// MetricForwardedToOperator (a Reason constant); empty otherwise.
	Reason string
	// Key is the idempotency key, or its HashKey with Config.HashKeys; empty
	// for a record without one (Reason FailureNoKey).
	Key string
	// MessageID is the SQS message's id; empty for Do and DoResult.
	MessageID string
	// Fence is the fencing token of the lock the work ran under; 0 when it
	// did not run.
	Fence int64
	// Err is the error behind Kind: the handler's, the store's, or the
	// refusal (matching ErrDuplicate, ErrInProgress or ErrPayloadMismatch);
	// nil for MetricProcessed.
	Err error
	// LockLost: the lock was taken over, or could not be renewed, while the
	// work ran (MetricLockLost counts these).
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
	// (MetricBackoffApplied counts these).
	BackoffApplied bool
	// InProgressHidden: SQS confirmed the hiding of this record until the
	// lock that refused it can be taken over (MetricInProgressHidden counts
	// these).
	InProgressHidden bool
	// Duration is how long the record or call took, from its start to its
	// outcome. For records a Target receives as one batch, it is the
	// batch's time.
	Duration time.Duration
}

// outcomeOf is the Outcome of a record or call, counted as o; shownKey is
// its key as Outcome.Key shows it (locker.shownKey).
func (p *Processor) outcomeOf(shownKey, messageID string, o outcome) Outcome {
	res := o.res
	out := Outcome{
		Kind:      o.metric,
		Key:       shownKey,
		MessageID: messageID,
		Fence:     res.fence,
		Err:       res.err,
		LockLost:  o.lockLost,
		TookOver:  res.tookOver,
		Cached:    res.cached,
		Waited:    res.waited,
		Duration:  o.took,

		BackoffApplied:   o.backoffApplied,
		InProgressHidden: o.inProgressHidden,
	}
	switch {
	case out.Kind == MetricForwardedToOperator:
		out.Reason = o.reason
	case out.Kind == MetricFailed || out.Kind == "":
		// An outcome nothing set is a record never reached: Handle
		// reports it failed (see walkUnit).
		out.Kind, out.Reason = MetricFailed, o.failure
		if out.Reason == "" {
			out.Reason = FailureNotStarted
		}
	}
	if out.Err == nil && o.err != nil {
		out.Err = o.err
	}
	return out
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
