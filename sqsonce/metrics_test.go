package sqsonce_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/internal/metrics"
	"github.com/sqs-once/sqs-once/internal/metrics/metricstest"
	"github.com/sqs-once/sqs-once/internal/processor"
	"github.com/sqs-once/sqs-once/sqsonce"
)

// TestConfigMetrics: a library user who sets Config.Metrics gets the
// processor's EMF lines, as the deployed function does, under the function
// name it gives or, by default, Lambda's or the key prefix.
func TestConfigMetrics(t *testing.T) {
	t.Parallel()
	if os.Getenv("AWS_LAMBDA_FUNCTION_NAME") != "" {
		t.Skip("AWS_LAMBDA_FUNCTION_NAME is set: the default name would be it")
	}
	for _, tt := range []struct{ name, function, want string }{
		{"named", "orders-consumer", "orders-consumer"},
		{"the key prefix by default", "", "test"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			// Handle writes its metrics once, at its end: no lock needed.
			out := &bytes.Buffer{}
			b.cfg.Metrics, b.cfg.MetricsFunctionName = out, tt.function
			p, err := sqsonce.New(b.cfg, func(_ context.Context, msg events.SQSMessage) error {
				if msg.Body == "bad" {
					return errors.New("downstream 503")
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			from := time.Now()
			for _, batch := range [][]string{{"a", "b", "bad"}, {"a"}} {
				var ev events.SQSEvent
				for _, id := range batch {
					ev.Records = append(ev.Records, events.SQSMessage{MessageId: id, Body: id, EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders"})
				}
				if _, err := p.Handle(context.Background(), ev); err != nil {
					t.Fatal(err)
				}
			}
			// Do is not an invocation: it writes no metrics.
			if err := p.Do(context.Background(), "k", func(context.Context) error { return nil }); err != nil {
				t.Fatal(err)
			}
			docs := metricstest.Check(t, out.String(), processorSpec(tt.want, from, time.Now(), 2))
			metricstest.CheckSums(t, docs, tt.want, map[string]float64{"Processed": 2, "Duplicate": 1, "Failed": 1, "Failed/handler-error": 1})
		})
	}
}

// processorSpec is what the processor promises of its metrics: under
// function, over from..to, n invocations.
func processorSpec(function string, from, to time.Time, n int) metricstest.Spec {
	units := map[string]metrics.Unit{}
	for _, m := range []string{processor.MetricProcessed, processor.MetricUnrecordedCompletion, processor.MetricDuplicate,
		processor.MetricInProgress, processor.MetricInProgressDropped, processor.MetricForwardedToOperator,
		processor.MetricFailed, processor.MetricLockLost, processor.MetricBackoffApplied} {
		units[m] = metrics.Count
	}
	return metricstest.Spec{
		Function: function, From: from, To: to, Invocations: n, Units: units,
		Base: []string{processor.MetricProcessed, processor.MetricDuplicate, processor.MetricInProgress,
			processor.MetricUnrecordedCompletion, processor.MetricLockLost, processor.MetricBackoffApplied},
		Extra: []string{processor.DimensionReason},
	}
}
