package replay

import (
	"context"
	"strconv"

	"github.com/sqs-once/sqs-once/internal/metrics"
)

// The replayer's metrics, in namespace sqs-once with the dimension
// FunctionName, written once per invocation (Deps.Metrics). Each record is
// counted once, under Replayed, ForwardedToOperator, SendFailed or Held.
// The README's "Metrics" section says what each means for the guarantee.
const (
	// MetricReplayed: the main queue accepted the replay (Attempt: its n,
	// the sqs-dlq-replay-nb it carries).
	MetricReplayed = "Replayed"
	// MetricReplayDelay: the backoff drawn for each replay counted in
	// Replayed, in seconds (Attempt as there).
	MetricReplayDelay = "ReplayDelay"
	// MetricForwardedToOperator: the operator queue accepted the dead
	// letter (Reason: its sqs-once-reason).
	MetricForwardedToOperator = "ForwardedToOperator"
	// MetricSendFailed: the destination did not accept the record; it stays
	// in the DLQ and is retried.
	MetricSendFailed = "SendFailed"
	// MetricHeld: FIFO only, a record kept in the DLQ for its backoff or
	// behind an earlier record of its group.
	MetricHeld = "Held"
)

// DimensionAttempt is the dimension of Replayed and ReplayDelay that says
// which replay of a message they count. The dimensions every sqs-once
// metric shares are metrics.DimensionFunction and metrics.DimensionReason.
const DimensionAttempt = "Attempt"

// tally counts one invocation's records.
type tally struct{ set *metrics.Set }

func newTally(function string) tally {
	s := metrics.NewSet(metrics.Dimension{Name: metrics.DimensionFunction, Value: function})
	// Always written, zeros too, so a graph shows 0 rather than a gap.
	s.Count(MetricSendFailed, 0)
	return tally{set: s}
}

// add counts a record from its decision and the error of its send (or
// hold).
func (t tally) add(d decision, err error) {
	switch {
	case d.action != send:
		t.set.Count(MetricHeld, 1)
	case err != nil:
		t.set.Count(MetricSendFailed, 1)
	case d.reason != "":
		t.set.Count(MetricForwardedToOperator, 1, metrics.Dimension{Name: metrics.DimensionReason, Value: d.reason})
	default:
		attempt := metrics.Dimension{Name: DimensionAttempt, Value: strconv.Itoa(d.n)}
		t.set.Count(MetricReplayed, 1, attempt)
		t.set.Observe(MetricReplayDelay, metrics.Seconds, d.delay.Seconds(), attempt)
	}
}

// emitMetrics writes the tally to Deps.Metrics. A write that fails is
// logged and costs nothing else.
func (h *Handler) emitMetrics(ctx context.Context, t tally) {
	if h.metrics == nil {
		return
	}
	if err := t.set.Write(h.metrics, h.now()); err != nil {
		h.log.WarnContext(ctx, "metrics not written", "error", err)
	}
}
