//go:build integration

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
	"github.com/sqs-once/sqs-once/sqsonce"
)

func init() { runTests = mototest.Main }

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
	base := []string{string(sqsonce.KindProcessed), string(sqsonce.KindDuplicate), string(sqsonce.KindInProgress),
		string(sqsonce.KindUnrecordedCompletion), metrics.LockLost, metrics.BackoffApplied}
	for _, m := range base {
		units[m] = metrics.Count
	}
	docs := metricstest.Check(t, metricstest.Lines(out), metricstest.Spec{
		Function: "orders-processor", From: from, To: time.Now(), Invocations: 2, Units: units, Base: base,
	})
	metricstest.CheckSums(t, docs, "orders-processor", map[string]float64{"Processed": 2, "Duplicate": 1})
}
