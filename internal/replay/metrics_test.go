//go:build integration

package replay

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/internal/metrics"
	"github.com/sqs-once/sqs-once/internal/metrics/metricstest"
)

// testFunction is the FunctionName dimension of the tests' metrics.
const testFunction = "orders-replayer"

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// replayerSpec is what the replayer promises of its metrics at now over n
// invocations.
func replayerSpec(now time.Time, n int) metricstest.Spec {
	return metricstest.Spec{
		Function: testFunction, From: now, To: now, Invocations: n,
		Units: map[string]metrics.Unit{
			MetricReplayed: metrics.Count, MetricReplayDelay: metrics.Seconds, MetricForwardedToOperator: metrics.Count,
			MetricSendFailed: metrics.Count, MetricHeld: metrics.Count,
		},
		Base:  []string{MetricSendFailed},
		Extra: []string{DimensionAttempt, metrics.DimensionReason},
	}
}

func replays(n int) map[string]events.SQSMessageAttribute {
	return map[string]events.SQSMessageAttribute{"sqs-dlq-replay-nb": str("Number", strconv.Itoa(n))}
}

// TestMetricsCountEachDeadLetter runs batches through the replayer and
// checks the EMF documents it writes: one set per invocation, each record
// counted once where its fate was decided, and the delays drawn.
func TestMetricsCountEachDeadLetter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 23, 15, 0, 0, 0, time.UTC)
	sentAt := func(at time.Time, group string) func(*events.SQSMessage) {
		return func(r *events.SQSMessage) {
			r.Attributes["SentTimestamp"] = strconv.FormatInt(at.UnixMilli(), 10)
			r.Attributes["MessageGroupId"] = group
		}
	}
	with := func(r events.SQSMessage, opts ...func(*events.SQSMessage)) events.SQSMessage {
		for _, o := range opts {
			o(&r)
		}
		return r
	}
	many := make([]events.SQSMessage, 150)
	for i := range many {
		many[i] = record("m-"+strconv.Itoa(i), "x", nil)
	}
	tests := []struct {
		name    string
		o       options
		prepare func(b *bundle)
		records []events.SQSMessage
		want    map[string]float64
		// delays are the ReplayDelay values per attempt.
		delays map[string][]float64
	}{
		{
			name: "replays by attempt, forwards by reason",
			o:    options{env: map[string]string{"BACKOFF_BASE": "2"}},
			records: []events.SQSMessage{
				record("first", "x", nil), record("second", "x", replays(1)), record("other-first", "x", nil),
				record("spent", "x", replays(3)), record("garbled", "x", map[string]events.SQSMessageAttribute{"sqs-dlq-replay-nb": str("String", "abc")}),
			},
			want: map[string]float64{
				"Replayed": 3, "Replayed/1": 2, "Replayed/2": 1,
				"ReplayDelay": 4 + 4 + 8, "ReplayDelay/1": 8, "ReplayDelay/2": 8,
				"ForwardedToOperator": 2, "ForwardedToOperator/max-attempts": 1, "ForwardedToOperator/invalid-counter": 1,
			},
			delays: map[string][]float64{"1": {4, 4}, "2": {8}},
		},
		{
			name:    "sends the queues refuse",
			o:       options{env: map[string]string{"BACKOFF_BASE": "2"}},
			prepare: func(b *bundle) { b.api.failBody, b.api.failQueue = "refused", b.opURL },
			records: []events.SQSMessage{record("a", "refused", nil), record("b", "x", nil), record("c", "x", replays(3))},
			want:    map[string]float64{"Replayed": 1, "Replayed/1": 1, "ReplayDelay": 4, "ReplayDelay/1": 4, "SendFailed": 2},
			delays:  map[string][]float64{"1": {4}},
		},
		{
			name: "FIFO: held, waiting behind, and sent once its delay has passed",
			o:    options{fifoMain: true, env: map[string]string{"BACKOFF_BASE": "2"}},
			records: []events.SQSMessage{
				with(record("held", "x", nil), sentAt(now, "g")),
				with(record("behind", "x", nil), sentAt(now.Add(-time.Hour), "g")),
				with(record("due", "x", nil), sentAt(now.Add(-time.Hour), "h")),
			},
			want:   map[string]float64{"Held": 2, "Replayed": 1, "Replayed/1": 1, "ReplayDelay": 4, "ReplayDelay/1": 4},
			delays: map[string][]float64{"1": {4}},
		},
		{
			name:    "a large batch: one count, its delays spread over documents of 100",
			o:       options{env: map[string]string{"BACKOFF_BASE": "0"}},
			records: many,
			want:    map[string]float64{"Replayed": 150, "Replayed/1": 150},
			delays:  map[string][]float64{"1": make([]float64, 150)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.o.now = func() time.Time { return now }
			b := setup(t, tt.o)
			if tt.prepare != nil {
				tt.prepare(b)
			}
			b.handle(tt.records...)
			docs := metricstest.Check(t, b.metrics.String(), replayerSpec(now, 1))
			metricstest.CheckSums(t, docs, testFunction, tt.want)
			fn := metrics.Dimension{Name: metrics.DimensionFunction, Value: testFunction}
			for attempt, want := range tt.delays {
				got := metrics.Values(docs, MetricReplayDelay, fn, metrics.Dimension{Name: DimensionAttempt, Value: attempt})
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Errorf("attempt %s: delays %v recorded, want %v", attempt, got, want)
				}
			}
		})
	}
}
