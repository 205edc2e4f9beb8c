package sqsonce

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/internal/metrics"
	"github.com/sqs-once/sqs-once/internal/metrics/metricstest"
	"github.com/sqs-once/sqs-once/sqsonce/sqsoncetest"
)

// TestAPIConfigMetrics: a library user who sets ConsumerConfig.Metrics gets the
// processor's EMF lines, as the deployed function does, under the function
// name Config gives or, by default, the key prefix. AWS_LAMBDA_FUNCTION_NAME
// in the process's environment changes nothing: only FromEnv reads it.
func TestAPIConfigMetrics(t *testing.T) {
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "from-the-environment")
	for _, tt := range []struct{ name, function, want string }{
		{"named", "orders-consumer", "orders-consumer"},
		{"the key prefix by default", "", "test"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := &bytes.Buffer{}
			p, err := NewConsumer(ConsumerConfig{
				Config: Config{
					Store:     sqsoncetest.NewStore(),
					KeyPrefix: "test",
					Logger:    lockQuiet,
					// Handle writes its metrics once, at its end: no lock needed.
				},
				Metrics:      out,
				FunctionName: tt.function,
			}, func(_ context.Context, msg events.SQSMessage) error {
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
			docs := metricstest.Check(t, out.String(), apiProcessorSpec(tt.want, from, time.Now(), 2))
			metricstest.CheckSums(t, docs, tt.want, map[string]float64{"Processed": 2, "Duplicate": 1, "Failed": 1, "Failed/handler-error": 1})
		})
	}
}

// apiProcessorSpec is what the processor promises of its metrics: under
// function, over from..to, n invocations.
func apiProcessorSpec(function string, from, to time.Time, n int) metricstest.Spec {
	units := map[string]metrics.Unit{}
	for _, m := range []string{string(KindProcessed), string(KindUnrecordedCompletion), string(KindDuplicate),
		string(KindInProgress), string(KindInProgressDropped), string(KindForwardedToOperator), string(KindAlreadyStarted),
		string(KindFailed), metrics.LockLost, metrics.BackoffApplied} {
		units[m] = metrics.Count
	}
	return metricstest.Spec{
		Function: function, From: from, To: to, Invocations: n, Units: units,
		Base: []string{string(KindProcessed), string(KindDuplicate), string(KindInProgress),
			string(KindUnrecordedCompletion), metrics.LockLost, metrics.BackoffApplied},
		Extra: []string{metrics.DimensionReason},
	}
}
