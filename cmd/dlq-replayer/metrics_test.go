//go:build integration

package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/internal/lambdamain/lambdamaintest"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/metrics"
	"github.com/sqs-once/sqs-once/internal/metrics/metricstest"
	"github.com/sqs-once/sqs-once/internal/replay"
)

func init() { runTests = mototest.Main }

// TestMetricsOnStandardOutput: the function, run as Lambda runs it, writes
// its metrics to standard output (where Lambda's logs, and so CloudWatch,
// take them from), one set per invocation under its function name.
func TestMetricsOnStandardOutput(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	env := []string{
		"AWS_LAMBDA_FUNCTION_NAME=orders-dlq-replayer",
		"MAIN_QUEUE_URL=" + mototest.NewQueue(t, cfg, false, nil),
		"OPERATOR_QUEUE_URL=" + mototest.NewQueue(t, cfg, false, nil),
		"JITTER=none", "BACKOFF_BASE=1",
	}
	spent := map[string]events.SQSMessageAttribute{"sqs-dlq-replay-nb": {DataType: "Number", StringValue: aws.String("3")}}
	ev, err := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "fresh", Body: "x", Attributes: map[string]string{}},
		{MessageId: "spent", Body: "x", Attributes: map[string]string{}, MessageAttributes: spent},
	}})
	if err != nil {
		t.Fatal(err)
	}
	from := time.Now()
	results, out := lambdamaintest.Invoke(t, "arn:aws:lambda:us-east-1:123456789012:function:orders-dlq-replayer", env, ev, ev)
	for _, r := range results {
		if r.Error != nil {
			t.Fatalf("invocation failed: %v", r.Error)
		}
	}
	docs := metricstest.Check(t, metricstest.Lines(out), metricstest.Spec{
		Function: "orders-dlq-replayer", From: from, To: time.Now(), Invocations: 2,
		Units: map[string]metrics.Unit{replay.MetricReplayed: metrics.Count, replay.MetricReplayDelay: metrics.Seconds,
			replay.MetricForwardedToOperator: metrics.Count, replay.MetricSendFailed: metrics.Count},
		Base:  []string{replay.MetricSendFailed},
		Extra: []string{replay.DimensionAttempt, metrics.DimensionReason},
	})
	// BACKOFF_BASE 1, rate 2, no jitter: the first replay waits 2 s.
	metricstest.CheckSums(t, docs, "orders-dlq-replayer", map[string]float64{
		"Replayed": 2, "Replayed/1": 2, "ReplayDelay": 4, "ReplayDelay/1": 4,
		"ForwardedToOperator": 2, "ForwardedToOperator/max-attempts": 2,
	})
}
