package sqsonce

import (
	"context"

	"github.com/sqs-once/sqs-once/internal/metrics"
)

// emitMetrics writes the invocation's metrics, counted from the records'
// Outcomes (those Config.OnOutcome receives), to ConsumerConfig.Metrics: in
// namespace sqs-once with the dimension FunctionName, each record once
// under its Kind (with the dimension Reason when it has one), and again
// under LockLost, BackoffApplied and InProgressHidden for what happened on
// the way. A write that fails is logged and costs nothing else: metrics
// never change what happens to a record.
func (p *Processor) emitMetrics(ctx context.Context, outs []Outcome) {
	if p.cfg.Metrics == nil || len(outs) == 0 {
		return
	}
	s := metrics.NewSet(metrics.Dimension{Name: metrics.DimensionFunction, Value: p.cfg.FunctionName})
	// Always written, zeros too: the dashboard then shows 0, not a gap,
	// and the alarms on UnrecordedCompletion and LockLost return to OK.
	for _, name := range []string{string(KindProcessed), string(KindDuplicate), string(KindInProgress), string(KindUnrecordedCompletion), metrics.LockLost, metrics.BackoffApplied} {
		s.Count(name, 0)
	}
	for _, o := range outs {
		if o.LockLost {
			s.Count(metrics.LockLost, 1)
		}
		if o.BackoffApplied {
			s.Count(metrics.BackoffApplied, 1)
		}
		if o.InProgressHidden {
			s.Count(metrics.InProgressHidden, 1)
		}
		if o.Reason != "" {
			s.Count(string(o.Kind), 1, metrics.Dimension{Name: metrics.DimensionReason, Value: string(o.Reason)})
		} else {
			s.Count(string(o.Kind), 1)
		}
	}
	if err := s.Write(p.cfg.Metrics, p.now()); err != nil {
		p.log.WarnContext(ctx, "metrics not written", "error", err)
	}
}
