package sqsonce

import (
	"context"

	"github.com/sqs-once/sqs-once/internal/metrics"
)

// The processor's metrics, in namespace sqs-once with the dimension
// FunctionName, written once per invocation (Config.Metrics). Each record is
// counted once under the first of Processed, UnrecordedCompletion,
// Duplicate, InProgress, InProgressDropped, ForwardedToOperator and Failed
// that describes its fate; LockLost and BackoffApplied count records again,
// for what happened on the way. The README's "Metrics" section says what
// each means for the guarantee.
const (
	// MetricProcessed: the handler (or target) succeeded and the key is
	// COMPLETED.
	MetricProcessed = "Processed"
	// MetricUnrecordedCompletion: the handler succeeded but its completion
	// could not be recorded (the write failed, or the lock was lost): a
	// later delivery of the key may run it again.
	MetricUnrecordedCompletion = "UnrecordedCompletion"
	// MetricDuplicate: the key had completed; the handler did not run.
	MetricDuplicate = "Duplicate"
	// MetricInProgress: another holder had the key's live lock; the record
	// was retried.
	MetricInProgress = "InProgress"
	// MetricInProgressDropped: as InProgress, but deleted unprocessed
	// (IN_PROGRESS=drop).
	MetricInProgressDropped = "InProgressDropped"
	// MetricForwardedToOperator: the operator queue accepted the record
	// (Reason: its sqs-once-reason).
	MetricForwardedToOperator = "ForwardedToOperator"
	// MetricFailed: the record was reported failed, to be redelivered
	// (Reason: one of the Failure constants).
	MetricFailed = "Failed"
	// MetricLockLost: the lock was taken over or could not be renewed while
	// the handler ran.
	MetricLockLost = "LockLost"
	// MetricBackoffApplied: SQS confirmed the failure backoff of a failed
	// record (FAILURE_BACKOFF_BASE).
	MetricBackoffApplied = "BackoffApplied"
	// MetricInProgressHidden: SQS confirmed the hiding of a record refused
	// as in progress until the lock that refused it can be taken over.
	// Written only when not zero.
	MetricInProgressHidden = "InProgressHidden"
)

// Dimensions of the processor's metrics.
const (
	DimensionFunction = "FunctionName"
	DimensionReason   = "Reason"
)

// Reasons a record is counted Failed (the Reason dimension).
const (
	// FailureHandler: the handler or the target returned an error (a
	// Permanent one too, without an operator queue).
	FailureHandler = "handler-error"
	// FailureLockLost: the handler's lock was lost while it ran.
	FailureLockLost = "lock-lost"
	// FailureStoreUnavailable: the table failed, throttled or did not
	// answer; the handler did not run.
	FailureStoreUnavailable = "store-unavailable"
	// FailureStoreMisconfigured: the table is missing, denied, of another
	// schema, or holds a foreign record; the handler did not run.
	FailureStoreMisconfigured = "store-misconfigured"
	// FailureNoKey: the record has no idempotency key.
	FailureNoKey = "no-key"
	// FailurePayloadMismatch: the key was seen with another body and there
	// is no operator queue.
	FailurePayloadMismatch = "payload-mismatch"
	// FailureNotStarted: the record was not started, its time kept for the
	// batch's last calls.
	FailureNotStarted = "not-started"
	// FailureGroupBlocked: an earlier record of its FIFO message group failed.
	FailureGroupBlocked = "group-blocked"
	// FailureDeliveryUnknown: the target's answer was lost; the lock is kept
	// until it expires.
	FailureDeliveryUnknown = "delivery-unknown"
	// FailureForward: the operator queue did not accept the record.
	FailureForward = "forward-failed"
)

// emitMetrics writes the invocation's metrics, counted from the records'
// Outcomes (those Config.OnOutcome receives), to Config.Metrics. A write
// that fails is logged and costs nothing else: metrics never change what
// happens to a record.
func (p *Processor) emitMetrics(ctx context.Context, outs []Outcome) {
	if p.cfg.Metrics == nil || len(outs) == 0 {
		return
	}
	s := metrics.NewSet(metrics.Dimension{Name: DimensionFunction, Value: p.cfg.FunctionName})
	// Always written, zeros too: the dashboard then shows 0, not a gap,
	// and the alarms on UnrecordedCompletion and LockLost return to OK.
	for _, name := range []string{MetricProcessed, MetricDuplicate, MetricInProgress, MetricUnrecordedCompletion, MetricLockLost, MetricBackoffApplied} {
		s.Count(name, 0)
	}
	for _, o := range outs {
		if o.LockLost {
			s.Count(MetricLockLost, 1)
		}
		if o.BackoffApplied {
			s.Count(MetricBackoffApplied, 1)
		}
		if o.InProgressHidden {
			s.Count(MetricInProgressHidden, 1)
		}
		if o.Reason != "" {
			s.Count(o.Kind, 1, metrics.Dimension{Name: DimensionReason, Value: o.Reason})
		} else {
			s.Count(o.Kind, 1)
		}
	}
	if err := s.Write(p.cfg.Metrics, p.now()); err != nil {
		p.log.WarnContext(ctx, "metrics not written", "error", err)
	}
}
