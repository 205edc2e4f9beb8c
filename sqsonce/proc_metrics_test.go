package sqsonce

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/metrics"
	"github.com/sqs-once/sqs-once/internal/metrics/metricstest"
	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// procMetricsSpec is what the processor promises of its metrics over the
// clock's span from..to and n invocations.
func procMetricsSpec(from, to time.Time, n int) metricstest.Spec {
	return apiProcessorSpec(procFunction, from, to, n)
}

// metricCounts are what CloudWatch's Sum would show: "Metric" per function,
// and "Metric/reason" per function and reason; any other is 0.
type metricCounts map[string]float64

// checkProcMetrics checks the EMF lines b's processors wrote
// (metricstest.Check) and their sums.
func checkProcMetrics(t *testing.T, b *procBundle, from time.Time, n int, want metricCounts) {
	t.Helper()
	docs := metricstest.Check(t, b.metrics.String(), procMetricsSpec(from, b.clock.Now(), n))
	metricstest.CheckSums(t, docs, procFunction, want)
}

// metricsCase is a run of invocations and the metrics it must write.
type metricsCase struct {
	name      string
	configure func(*ConsumerConfig)
	// prepare runs before the measured invocations (its metrics are
	// discarded); run makes them and returns how many.
	prepare func(t *testing.T, b *procBundle)
	run     func(t *testing.T, b *procBundle) int
	want    metricCounts
}

// runMetricsCases runs every case on every backend of backends.
func runMetricsCases(t *testing.T, backends []procBackend, cases []metricsCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, be := range backends {
				t.Run(be.name, func(t *testing.T) {
					t.Parallel()
					var configure []func(*ConsumerConfig)
					if tt.configure != nil {
						configure = append(configure, tt.configure)
					}
					told := &toldOutcomes{}
					configure = append(configure, func(c *ConsumerConfig) { c.OnOutcome = told.add })
					b := procSetup(t, be, configure...)
					if tt.prepare != nil {
						tt.prepare(t, b)
					}
					b.metrics.reset()
					told.reset()
					from := b.clock.Now()
					n := tt.run(t, b)
					checkProcMetrics(t, b, from, n, tt.want)
					// The hook sees what the metrics count: one source.
					got := told.counts()
					for _, k := range slices.Sorted(maps.Keys(tt.want)) {
						if got[k] != tt.want[k] {
							t.Errorf("OnOutcome: %s = %v, want %v as the metrics", k, got[k], tt.want[k])
						}
					}
					for k, v := range got {
						if _, ok := tt.want[k]; !ok && v != 0 {
							t.Errorf("OnOutcome: %s = %v, want 0 as the metrics", k, v)
						}
					}
				})
			}
		})
	}
}

// toldOutcomes collects the Outcomes Config.OnOutcome receives.
type toldOutcomes struct {
	mu   sync.Mutex
	outs []Outcome
}

func (o *toldOutcomes) add(_ context.Context, out Outcome) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.outs = append(o.outs, out)
}

func (o *toldOutcomes) reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.outs = nil
}

// counts are the Outcomes counted as the metrics count records:
// "Kind", "Kind/Reason", and the flags' metrics.
func (o *toldOutcomes) counts() metricCounts {
	o.mu.Lock()
	defer o.mu.Unlock()
	c := metricCounts{}
	for _, out := range o.outs {
		c[string(out.Kind)]++
		if out.Reason != "" {
			c[string(out.Kind)+"/"+string(out.Reason)]++
		}
		if out.LockLost {
			c[metrics.LockLost]++
		}
		if out.BackoffApplied {
			c[metrics.BackoffApplied]++
		}
		if out.InProgressHidden {
			c[metrics.InProgressHidden]++
		}
	}
	return c
}

func withBackoff(c *ConsumerConfig) { c.FailureBackoffBase = 10 * time.Second }

// TestMetricsCountEachFate runs batches through the processor and checks
// the EMF documents it writes: one set per invocation, aggregated, with
// each record counted where the processor decided its fate.
func TestMetricsCountEachFate(t *testing.T) {
	t.Parallel()
	runMetricsCases(t, procBackends, []metricsCase{
		{
			name:    "processed, duplicate and failed in one batch: one document each",
			prepare: func(t *testing.T, b *procBundle) { b.handle(t, procRecord("done-before", "x")) },
			run: func(t *testing.T, b *procBundle) int {
				b.handler.errs["bad"] = errors.New("downstream 503")
				b.handle(t, procRecord("done-before", "x"), procRecord("a", "x"), procRecord("b", "x"), procRecord("c", "x"), procRecord("bad", "x"))
				return 1
			},
			want: metricCounts{"Processed": 3, "Duplicate": 1, "Failed": 1, "Failed/handler-error": 1},
		},
		{
			name: "two invocations add up",
			run: func(t *testing.T, b *procBundle) int {
				b.handle(t, procRecord("a", "x"))
				b.handle(t, procRecord("a", "x"), procRecord("b", "x"))
				return 2
			},
			want: metricCounts{"Processed": 2, "Duplicate": 1},
		},
		{
			name:      "permanent failure and payload mismatch forwarded to the operator queue",
			configure: func(c *ConsumerConfig) { c.ValidatePayload = true },
			prepare: func(t *testing.T, b *procBundle) {
				b.cfg.OperatorQueueURL = b.queues.newQueue(t, false, nil)
				b.processor = b.newProcessor(t)
				b.handle(t, procRecord("seen", "first body"))
			},
			run: func(t *testing.T, b *procBundle) int {
				b.handler.errs["p"] = Permanent(errors.New("unparsable"))
				b.handle(t, procRecord("p", "x"), procRecord("seen", "another body"), procRecord("ok", "x"))
				return 1
			},
			want: metricCounts{"Processed": 1, "ForwardedToOperator": 2, "ForwardedToOperator/permanent-error": 1, "ForwardedToOperator/payload-mismatch": 1},
		},
		{
			name: "operator queue refuses: failed, not forwarded",
			prepare: func(t *testing.T, b *procBundle) {
				b.cfg.OperatorQueueURL = b.queues.missingQueue(t)
				b.processor = b.newProcessor(t)
			},
			run: func(t *testing.T, b *procBundle) int {
				b.handler.errs["p"] = Permanent(errors.New("unparsable"))
				b.handle(t, procRecord("p", "x"))
				return 1
			},
			want: metricCounts{"Failed": 1, "Failed/forward-failed": 1},
		},
		{
			name: "permanent failure without an operator queue",
			run: func(t *testing.T, b *procBundle) int {
				b.handler.errs["p"] = Permanent(errors.New("unparsable"))
				b.handle(t, procRecord("p", "x"))
				return 1
			},
			want: metricCounts{"Failed": 1, "Failed/handler-error": 1},
		},
		{
			name:      "no key",
			configure: func(c *ConsumerConfig) { c.Key = KeyFromBody("/orderId") },
			run: func(t *testing.T, b *procBundle) int {
				b.handle(t, procRecord("a", `{"orderId":"o-1"}`), procRecord("b", `{}`))
				return 1
			},
			want: metricCounts{"Processed": 1, "Failed": 1, "Failed/no-key": 1},
		},
		{
			name: "table throttling",
			run: func(t *testing.T, b *procBundle) int {
				b.faults.fail("acquire", &types.ProvisionedThroughputExceededException{Message: aws.String("throttled")})
				b.handle(t, procRecord("a", "x"), procRecord("b", "x"))
				return 1
			},
			want: metricCounts{"Failed": 2, "Failed/store-unavailable": 2},
		},
		{
			name: "missing table",
			run: func(t *testing.T, b *procBundle) int {
				// As a store sorts it: the DynamoDB store's own sorting of
				// the SDK's error is dynamostore's test.
				b.faults.fail("acquire", fmt.Errorf("%w: %w", store.ErrMisconfigured, &types.ResourceNotFoundException{Message: aws.String("no table")}))
				b.handle(t, procRecord("a", "x"))
				return 1
			},
			want: metricCounts{"Failed": 1, "Failed/store-misconfigured": 1},
		},
		{
			name:    "COMPLETED write failing every attempt: unrecorded completion",
			prepare: func(t *testing.T, b *procBundle) { b.faults.fail("complete", &types.InternalServerError{}) },
			run: func(t *testing.T, b *procBundle) int {
				b.handle(t, procRecord("a", "x"))
				return 1
			},
			want: metricCounts{"UnrecordedCompletion": 1},
		},
		{
			name: "lock taken over while the handler ran: lock lost and unrecorded",
			run: func(t *testing.T, b *procBundle) int {
				second := b.newProcessor(t)
				first := true
				b.handler.hook = func(context.Context, events.SQSMessage) {
					if !first {
						return
					}
					first = false
					b.clock.Advance(61 * time.Second) // past LOCK_TIMEOUT
					if _, err := second.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{procRecord("a", "x")}}); err != nil {
						t.Error(err)
					}
				}
				b.handle(t, procRecord("a", "x"))
				return 2
			},
			want: metricCounts{"Processed": 1, "UnrecordedCompletion": 1, "LockLost": 1},
		},
		{
			name: "FIFO group blocked behind a failure",
			run: func(t *testing.T, b *procBundle) int {
				b.handler.errs["a"] = errors.New("downstream 503")
				b.handle(t, procRecord("a", "x", inGroup("g")), procRecord("b", "x", inGroup("g")), procRecord("c", "x", inGroup("h")))
				return 1
			},
			want: metricCounts{"Processed": 1, "Failed": 2, "Failed/handler-error": 1, "Failed/group-blocked": 1},
		},
		{
			name: "no time left to start",
			run: func(t *testing.T, b *procBundle) int {
				ctx, cancel := context.WithDeadline(context.Background(), b.clock.Now().Add(100*time.Millisecond))
				defer cancel()
				resp, err := b.processor.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{procRecord("a", "x"), procRecord("b", "x")}})
				if err != nil || len(resp.BatchItemFailures) != 2 {
					t.Fatalf("Handle = %v, %v; want both records failed", resp, err)
				}
				return 1
			},
			want: metricCounts{"Failed": 2, "Failed/not-started": 2},
		},
		{
			name:      "failure backoff applied",
			configure: withBackoff,
			run: func(t *testing.T, b *procBundle) int {
				_, ev := receiveEvent(t, b, nil, "fails", "works", "fails too")
				for _, r := range ev.Records {
					if strings.HasPrefix(r.Body, "fails") {
						b.handler.errs[r.MessageId] = errors.New("downstream 503")
					}
				}
				if resp, err := b.processor.Handle(context.Background(), ev); err != nil || len(resp.BatchItemFailures) != 2 {
					t.Fatalf("Handle = %v, %v", resp, err)
				}
				return 1
			},
			want: metricCounts{"Processed": 1, "Failed": 2, "Failed/handler-error": 2, "BackoffApplied": 2},
		},
		{
			name:      "failure on the last receive before the DLQ: left visible, counted as applied",
			configure: withBackoff,
			run: func(t *testing.T, b *procBundle) int {
				dlq := b.queues.newQueue(t, false, nil)
				url, ev := receiveEvent(t, b, map[string]string{
					"RedrivePolicy": `{"deadLetterTargetArn":"` + b.queues.queueARN(t, dlq) + `","maxReceiveCount":"1"}`,
				}, "fails")
				b.cfg.QueueURL = url
				b.processor = b.newProcessor(t)
				b.handler.errs[ev.Records[0].MessageId] = errors.New("downstream 503")
				if resp, err := b.processor.Handle(context.Background(), ev); err != nil || len(resp.BatchItemFailures) != 1 {
					t.Fatalf("Handle = %v, %v", resp, err)
				}
				if !strings.Contains(b.logs.String(), "failed record left visible") {
					t.Errorf("no log line says the record was left visible:\n%s", b.logs.String())
				}
				return 1
			},
			want: metricCounts{"Failed": 1, "Failed/handler-error": 1, "BackoffApplied": 1},
		},
		{
			name:      "failure backoff SQS refuses: not counted",
			configure: withBackoff,
			run: func(t *testing.T, b *procBundle) int {
				// The record's queue does not exist: its receipt handle
				// cannot be changed.
				b.handler.errs["a"] = errors.New("downstream 503")
				b.handle(t, procRecord("a", "x"))
				return 1
			},
			want: metricCounts{"Failed": 1, "Failed/handler-error": 1},
		},
	})
	// What the memory store alone can script: a completion applied whose
	// answer was lost (TestMetricsOfTableFaultsOnTheWire does it to DynamoDB's).
	runMetricsCases(t, []procBackend{memoryBackend}, []metricsCase{
		{
			name:    "COMPLETED write answered with an error after it applied: recognised, processed",
			prepare: func(t *testing.T, b *procBundle) { b.faults.(*faultStore).loseAnswer("complete") },
			run: func(t *testing.T, b *procBundle) int {
				b.handle(t, procRecord("a", "x"))
				return 1
			},
			want: metricCounts{"Processed": 1},
		},
	})
}

// TestMetricsInProgress: a record whose key another instance holds counts
// as in progress, or as dropped under IN_PROGRESS=drop.
func TestMetricsInProgress(t *testing.T) {
	t.Parallel()
	for policy, want := range map[InProgressPolicy]metricCounts{
		InProgressRetry: {"InProgress": 1},
		InProgressDrop:  {"InProgressDropped": 1},
	} {
		t.Run(string(policy), func(t *testing.T) {
			t.Parallel()
			eachBackend(t, func(t *testing.T, be procBackend) {
				b := procSetup(t, be, func(c *ConsumerConfig) { c.InProgress = policy })
				release, entered := make(chan struct{}), make(chan struct{})
				b.handler.hook = func(_ context.Context, msg events.SQSMessage) {
					if msg.ReceiptHandle == "first" {
						close(entered)
						<-release
					}
				}
				done := make(chan struct{})
				go func() {
					defer close(done)
					_, _ = b.processor.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
						procRecord("m-1", "x", func(m *events.SQSMessage) { m.ReceiptHandle = "first" })}})
				}()
				<-entered
				// Only the second instance's invocation is measured: the first
				// writes its metrics after the release.
				second := b.newProcessor(t)
				b.metrics.reset()
				if _, err := second.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{procRecord("m-1", "x")}}); err != nil {
					t.Fatal(err)
				}
				checkProcMetrics(t, b, b.clock.Now(), 1, want)
				close(release)
				<-done
			})
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
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be)
		cfg := b.cfg
		cfg.Metrics = failingWriter{}
		p := mustProcessor(t, cfg, b.handler.handle, b.sqs)
		b.handler.errs["bad"] = errors.New("boom")
		resp, err := p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{procRecord("ok", "x"), procRecord("bad", "x")}})
		if err != nil || fmt.Sprint(failedOf(resp)) != "[bad]" {
			t.Errorf("Handle = %v, %v; want [bad] failed", failedOf(resp), err)
		}
		if !strings.Contains(b.logs.String(), "metrics not written") {
			t.Errorf("no log line for the failed metrics write:\n%s", b.logs.String())
		}
	})
}
