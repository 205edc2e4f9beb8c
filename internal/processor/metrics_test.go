package processor_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/metrics"
	"github.com/sqs-once/sqs-once/internal/metrics/metricstest"
	"github.com/sqs-once/sqs-once/internal/processor"
)

func (l *logBuffer) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Reset()
}

// processorSpec is what the processor promises of its metrics over the
// clock's span from..to and n invocations.
func processorSpec(from, to time.Time, n int) metricstest.Spec {
	units := map[string]metrics.Unit{}
	for _, name := range []string{
		processor.MetricProcessed, processor.MetricUnrecordedCompletion, processor.MetricDuplicate,
		processor.MetricInProgress, processor.MetricInProgressDropped, processor.MetricForwardedToOperator,
		processor.MetricFailed, processor.MetricLockLost, processor.MetricBackoffApplied,
	} {
		units[name] = metrics.Count
	}
	return metricstest.Spec{
		Function: testFunction, From: from, To: to, Invocations: n, Units: units,
		Base: []string{
			processor.MetricProcessed, processor.MetricDuplicate, processor.MetricInProgress,
			processor.MetricUnrecordedCompletion, processor.MetricLockLost, processor.MetricBackoffApplied,
		},
		Extra: []string{processor.DimensionReason},
	}
}

// counts are what CloudWatch's Sum would show: "Metric" per function, and
// "Metric/reason" per function and reason; any other is 0.
type counts map[string]float64

// checkMetrics checks the EMF lines b's handlers wrote (metricstest.Check)
// and their sums.
func checkMetrics(t *testing.T, b *bundle, from time.Time, n int, want counts) {
	t.Helper()
	docs := metricstest.Check(t, b.metrics.String(), processorSpec(from, b.clock.Now(), n))
	metricstest.CheckSums(t, docs, testFunction, want)
}

// faultyTable routes b's table calls through a fault proxy, for the test
// to script, and builds b's handler again on it. The SDK's retries wait 5 ms
// at most.
func faultyTable(t *testing.T, b *bundle) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start(mototest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	client := dynamodb.NewFromConfig(b.aws, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(p.URL)
		o.Retryer = retry.AddWithMaxBackoffDelay(retry.NewStandard(), 5*time.Millisecond)
	})
	b.dynamo.DynamoAPI = motoserver.SerializeWrites(client)
	b.handler = b.newHandler(t)
	return p
}

var completeWrite = faultproxy.BodyContains("REMOVE")

// TestMetricsCountEachFate runs batches through the handler and checks the
// EMF documents it writes: one set per invocation, aggregated, with each
// record counted where the processor decided its fate.
func TestMetricsCountEachFate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		configure func(*processor.Config)
		// prepare runs before the measured invocations (its metrics are
		// discarded); run makes them and returns how many.
		prepare func(t *testing.T, b *bundle)
		run     func(t *testing.T, b *bundle) int
		want    counts
	}{
		{
			name:    "processed, duplicate and failed in one batch: one document each",
			prepare: func(t *testing.T, b *bundle) { b.handle(t, record("done-before", "x")) },
			run: func(t *testing.T, b *bundle) int {
				b.business.errs["bad"] = errors.New("downstream 503")
				b.handle(t, record("done-before", "x"), record("a", "x"), record("b", "x"), record("c", "x"), record("bad", "x"))
				return 1
			},
			want: counts{"Processed": 3, "Duplicate": 1, "Failed": 1, "Failed/handler-error": 1},
		},
		{
			name: "two invocations add up",
			run: func(t *testing.T, b *bundle) int {
				b.handle(t, record("a", "x"))
				b.handle(t, record("a", "x"), record("b", "x"))
				return 2
			},
			want: counts{"Processed": 2, "Duplicate": 1},
		},
		{
			name:      "permanent failure and payload mismatch forwarded to the operator queue",
			configure: func(c *processor.Config) { c.ValidatePayload = true },
			prepare: func(t *testing.T, b *bundle) {
				b.cfg.OperatorQueueURL = mototest.NewQueue(t, b.aws, false, nil)
				b.handler = b.newHandler(t)
				b.handle(t, record("seen", "first body"))
			},
			run: func(t *testing.T, b *bundle) int {
				b.business.errs["p"] = processor.Permanent(errors.New("unparsable"))
				b.handle(t, record("p", "x"), record("seen", "another body"), record("ok", "x"))
				return 1
			},
			want: counts{"Processed": 1, "ForwardedToOperator": 2, "ForwardedToOperator/permanent-error": 1, "ForwardedToOperator/payload-mismatch": 1},
		},
		{
			name: "operator queue refuses: failed, not forwarded",
			prepare: func(t *testing.T, b *bundle) {
				b.cfg.OperatorQueueURL = mototest.URL(t) + "/123456789012/does-not-exist"
				b.handler = b.newHandler(t)
			},
			run: func(t *testing.T, b *bundle) int {
				b.business.errs["p"] = processor.Permanent(errors.New("unparsable"))
				b.handle(t, record("p", "x"))
				return 1
			},
			want: counts{"Failed": 1, "Failed/forward-failed": 1},
		},
		{
			name: "permanent failure without an operator queue",
			run: func(t *testing.T, b *bundle) int {
				b.business.errs["p"] = processor.Permanent(errors.New("unparsable"))
				b.handle(t, record("p", "x"))
				return 1
			},
			want: counts{"Failed": 1, "Failed/handler-error": 1},
		},
		{
			name: "no key",
			configure: func(c *processor.Config) {
				key, err := processor.ParseKeySource("body:/orderId")
				if err != nil {
					panic(err)
				}
				c.Key = key
			},
			run: func(t *testing.T, b *bundle) int {
				b.handle(t, record("a", `{"orderId":"o-1"}`), record("b", `{}`))
				return 1
			},
			want: counts{"Processed": 1, "Failed": 1, "Failed/no-key": 1},
		},
		{
			name: "table throttling",
			run: func(t *testing.T, b *bundle) int {
				b.dynamo.fail = map[string]error{"acquire": &types.ProvisionedThroughputExceededException{Message: aws.String("throttled")}}
				b.handle(t, record("a", "x"), record("b", "x"))
				return 1
			},
			want: counts{"Failed": 2, "Failed/store-unavailable": 2},
		},
		{
			name: "missing table",
			run: func(t *testing.T, b *bundle) int {
				b.dynamo.fail = map[string]error{"acquire": &types.ResourceNotFoundException{Message: aws.String("no table")}}
				b.handle(t, record("a", "x"))
				return 1
			},
			want: counts{"Failed": 1, "Failed/store-misconfigured": 1},
		},
		{
			name: "COMPLETED write failing every attempt: unrecorded completion",
			prepare: func(t *testing.T, b *bundle) {
				faults := make([]faultproxy.Fault, 40)
				for i := range faults {
					faults[i] = faultproxy.FailBefore
				}
				faultyTable(t, b).ScriptWhen("UpdateItem", completeWrite, faults...)
			},
			run: func(t *testing.T, b *bundle) int {
				b.handle(t, record("a", "x"))
				return 1
			},
			want: counts{"UnrecordedCompletion": 1},
		},
		{
			name: "COMPLETED write answered 500 after it applied: recognised, processed",
			prepare: func(t *testing.T, b *bundle) {
				faultyTable(t, b).ScriptWhen("UpdateItem", completeWrite, faultproxy.FailAfter)
			},
			run: func(t *testing.T, b *bundle) int {
				b.handle(t, record("a", "x"))
				return 1
			},
			want: counts{"Processed": 1},
		},
		{
			name: "lock taken over while the handler ran: lock lost and unrecorded",
			run: func(t *testing.T, b *bundle) int {
				second := b.newHandler(t)
				first := true
				b.business.hook = func(context.Context, events.SQSMessage) {
					if !first {
						return
					}
					first = false
					b.clock.Advance(61 * time.Second) // past LOCK_TIMEOUT
					if _, err := second.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("a", "x")}}); err != nil {
						t.Error(err)
					}
				}
				b.handle(t, record("a", "x"))
				return 2
			},
			want: counts{"Processed": 1, "UnrecordedCompletion": 1, "LockLost": 1},
		},
		{
			name: "FIFO group blocked behind a failure",
			run: func(t *testing.T, b *bundle) int {
				b.business.errs["a"] = errors.New("downstream 503")
				b.handle(t, record("a", "x", fifo("g")), record("b", "x", fifo("g")), record("c", "x", fifo("h")))
				return 1
			},
			want: counts{"Processed": 1, "Failed": 2, "Failed/handler-error": 1, "Failed/group-blocked": 1},
		},
		{
			name: "no time left to start",
			run: func(t *testing.T, b *bundle) int {
				ctx, cancel := context.WithDeadline(context.Background(), b.clock.Now().Add(100*time.Millisecond))
				defer cancel()
				resp, err := b.handler.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{record("a", "x"), record("b", "x")}})
				if err != nil || len(resp.BatchItemFailures) != 2 {
					t.Fatalf("Handle = %v, %v; want both records failed", resp, err)
				}
				return 1
			},
			want: counts{"Failed": 2, "Failed/not-started": 2},
		},
		{
			name:      "failure backoff applied",
			configure: func(c *processor.Config) { c.FailureBackoffBase = 10 * time.Second },
			run: func(t *testing.T, b *bundle) int {
				_, ev := receiveEvent(t, b, nil, "fails", "works", "fails too")
				for _, r := range ev.Records {
					if strings.HasPrefix(r.Body, "fails") {
						b.business.errs[r.MessageId] = errors.New("downstream 503")
					}
				}
				if resp, err := b.handler.Handle(context.Background(), ev); err != nil || len(resp.BatchItemFailures) != 2 {
					t.Fatalf("Handle = %v, %v", resp, err)
				}
				return 1
			},
			want: counts{"Processed": 1, "Failed": 2, "Failed/handler-error": 2, "BackoffApplied": 2},
		},
		{
			name:      "failure on the last receive before the DLQ: left visible, counted as applied",
			configure: func(c *processor.Config) { c.FailureBackoffBase = 10 * time.Second },
			run: func(t *testing.T, b *bundle) int {
				dlq := mototest.NewQueue(t, b.aws, false, nil)
				url, ev := receiveEvent(t, b, map[string]string{
					"RedrivePolicy": `{"deadLetterTargetArn":"` + mototest.QueueARN(t, b.aws, dlq) + `","maxReceiveCount":"1"}`,
				}, "fails")
				b.cfg.QueueURL = url
				b.handler = b.newHandler(t)
				b.business.errs[ev.Records[0].MessageId] = errors.New("downstream 503")
				if resp, err := b.handler.Handle(context.Background(), ev); err != nil || len(resp.BatchItemFailures) != 1 {
					t.Fatalf("Handle = %v, %v", resp, err)
				}
				if !strings.Contains(b.logs.String(), "failed record left visible") {
					t.Errorf("no log line says the record was left visible:\n%s", b.logs.String())
				}
				return 1
			},
			want: counts{"Failed": 1, "Failed/handler-error": 1, "BackoffApplied": 1},
		},
		{
			name:      "failure backoff SQS refuses: not counted",
			configure: func(c *processor.Config) { c.FailureBackoffBase = 10 * time.Second },
			run: func(t *testing.T, b *bundle) int {
				// The record's queue does not exist: its receipt handle
				// cannot be changed.
				b.business.errs["a"] = errors.New("downstream 503")
				b.handle(t, record("a", "x"))
				return 1
			},
			want: counts{"Failed": 1, "Failed/handler-error": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var configure []func(*processor.Config)
			if tt.configure != nil {
				configure = append(configure, tt.configure)
			}
			b := setup(t, configure...)
			if tt.prepare != nil {
				tt.prepare(t, b)
			}
			b.metrics.reset()
			from := b.clock.Now()
			n := tt.run(t, b)
			checkMetrics(t, b, from, n, tt.want)
		})
	}
}

// TestMetricsInProgress: a record whose key another instance holds counts
// as in progress, or as dropped under IN_PROGRESS=drop.
func TestMetricsInProgress(t *testing.T) {
	t.Parallel()
	for policy, want := range map[string]counts{
		processor.InProgressRetry: {"InProgress": 1},
		processor.InProgressDrop:  {"InProgressDropped": 1},
	} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(c *processor.Config) { c.InProgress = policy })
			release, entered := make(chan struct{}), make(chan struct{})
			b.business.hook = func(_ context.Context, msg events.SQSMessage) {
				if msg.ReceiptHandle == "first" {
					close(entered)
					<-release
				}
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				b.handler.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
					record("m-1", "x", func(m *events.SQSMessage) { m.ReceiptHandle = "first" })}})
			}()
			<-entered
			// Only the second instance's invocation is measured: the first
			// writes its metrics after the release.
			second := b.newHandler(t)
			b.metrics.reset()
			if _, err := second.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("m-1", "x")}}); err != nil {
				t.Fatal(err)
			}
			checkMetrics(t, b, b.clock.Now(), 1, want)
			close(release)
			<-done
		})
	}
}

// failingWriter is a metrics destination that refuses every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("stdout closed") }

// TestMetricsNeverChangeARecordsFate: a metrics writer that fails is logged
// and changes nothing else.
func TestMetricsNeverChangeARecordsFate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := mustNew(t, b.cfg, processor.Deps{DynamoDB: b.dynamo, SQS: b.sqs, Business: b.business.Handle, Now: b.clock.Now,
		Logger: slog.New(slog.NewJSONHandler(b.logs, nil)), Metrics: failingWriter{}})
	b.business.errs["bad"] = errors.New("boom")
	resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("ok", "x"), record("bad", "x")}})
	if err != nil || fmt.Sprint(failedIDs(resp)) != "[bad]" {
		t.Errorf("Handle = %v, %v; want [bad] failed", failedIDs(resp), err)
	}
	if !strings.Contains(b.logs.String(), "metrics not written") {
		t.Errorf("no log line for the failed metrics write:\n%s", b.logs.String())
	}
}
