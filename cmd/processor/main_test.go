package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/internal/lambdamain/lambdamaintest"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/metrics"
	"github.com/sqs-once/sqs-once/internal/metrics/metricstest"
	"github.com/sqs-once/sqs-once/internal/processor"
)

func TestMain(m *testing.M) { lambdamaintest.TestMainWith(m, main, mototest.Main) }

func TestBadConfigurationStopsStartUp(t *testing.T) {
	t.Parallel()
	lambdamaintest.CheckBadConfig(t, []string{"IDEMPOTENCY_KEY=body:orderId", "IN_PROGRESS=skip", "TARGET=kafka:orders"},
		"IDEMPOTENCY_TABLE", "KEY_PREFIX", "IDEMPOTENCY_KEY", "IN_PROGRESS", "TARGET")
}

// A lambda target naming the processor's own function would invoke it for
// ever: start-up refuses it, by name, alias or ARN.
func TestTargetThatIsItselfStopsStartUp(t *testing.T) {
	t.Parallel()
	for _, target := range []string{"lambda:sqs-once-processor", "lambda:arn:aws:lambda:us-east-1:123456789012:function:sqs-once-processor:live"} {
		lambdamaintest.CheckStartFails(t, []string{
			"IDEMPOTENCY_TABLE=idempotency", "AWS_LAMBDA_FUNCTION_NAME=sqs-once-processor", "AWS_REGION=us-east-1",
			"TARGET=" + target,
		}, "Config.Target", "the target is the processor's own function")
	}
}

// TestMetricsOnStandardOutput: the function, run as Lambda runs it, writes
// its metrics to standard output (where Lambda's logs, and so CloudWatch,
// take them from), one set per invocation under its function name.
func TestMetricsOnStandardOutput(t *testing.T) {
	t.Parallel()
	env := []string{
		"AWS_LAMBDA_FUNCTION_NAME=orders-processor",
		"IDEMPOTENCY_TABLE=" + mototest.NewIdempotencyTable(t, mototest.Config(t)),
	}
	event := func(ids ...string) []byte {
		var ev events.SQSEvent
		for _, id := range ids {
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: id, Body: "x", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders",
				Attributes: map[string]string{"ApproximateReceiveCount": "1"}})
		}
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	from := time.Now()
	results, out := lambdamaintest.Invoke(t, "arn:aws:lambda:us-east-1:123456789012:function:orders-processor", env,
		event("a", "b"), event("a"))
	for _, r := range results {
		if r.Error != nil {
			t.Fatalf("invocation failed: %v", r.Error)
		}
	}
	units := map[string]metrics.Unit{}
	base := []string{processor.MetricProcessed, processor.MetricDuplicate, processor.MetricInProgress,
		processor.MetricUnrecordedCompletion, processor.MetricLockLost, processor.MetricBackoffApplied}
	for _, m := range base {
		units[m] = metrics.Count
	}
	docs := metricstest.Check(t, metricstest.Lines(out), metricstest.Spec{
		Function: "orders-processor", From: from, To: time.Now(), Invocations: 2, Units: units, Base: base,
	})
	metricstest.CheckSums(t, docs, "orders-processor", map[string]float64{"Processed": 2, "Duplicate": 1})
}
