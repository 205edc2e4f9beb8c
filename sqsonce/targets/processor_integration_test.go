//go:build integration

package targets_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/metrics"
	"github.com/sqs-once/sqs-once/internal/metrics/metricstest"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/internal/testclock"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// The targets of this package, driven by a Processor built with sqsonce.New
// (the public API) on DynamoDB, against moto_server's queues, topics, buses
// and functions: each key reaches its destination once, a refusal goes to
// the operator queue, a Lambda consumer's answers fail exactly the records
// it names.

// bundle is a deployed configuration on a fresh moto table, with what the
// tests observe: the clock the processor reads, its logs and its metrics.
type bundle struct {
	aws     aws.Config
	cfg     sqsonce.ConsumerConfig
	clock   *testclock.Clock
	logs    *syncBuffer
	metrics *syncBuffer
}

// function is the FunctionName dimension of the tests' metrics.
const function = "orders-processor"

// ordersARN is the queue the records come from.
const ordersARN = "arn:aws:sqs:us-east-1:123456789012:orders"

// setup configures a processor as the deployed function is by its
// environment (KEY_PREFIX test, LOCK_TIMEOUT 60, DEDUPE_WINDOW 3600), on a
// new moto table whose conditional writes are atomic, as DynamoDB's are.
func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{aws: mototest.Config(t), clock: testclock.New(time.Now()), logs: &syncBuffer{}, metrics: &syncBuffer{}}
	table := mototest.NewIdempotencyTable(t, b.aws)
	cfg, err := sqsonce.ConfigFromEnv(lookup(map[string]string{
		"IDEMPOTENCY_TABLE": table,
		"KEY_PREFIX":        "test",
		"LOCK_TIMEOUT":      "60",
		"DEDUPE_WINDOW":     "3600",
	}))
	if err != nil {
		t.Fatal(err)
	}
	client := dynamodb.NewFromConfig(b.aws)
	cfg.Store = dynamostore.New(motoserver.Atomic(client), table)
	cfg.AWS = b.aws
	cfg.Test.Now = b.clock.Now
	cfg.Test.Rand = func() float64 { return 0.5 }
	cfg.Logger = slog.New(slog.NewJSONHandler(b.logs, nil))
	cfg.Metrics = b.metrics
	cfg.FunctionName = function
	b.cfg = cfg
	return b
}

// syncBuffer collects the processor's log lines and metrics.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// withTarget is a processor on b's store delivering to tg instead of
// calling a Handler, keyed on the order id.
func withTarget(t *testing.T, b *bundle, tg sqsonce.Target) *sqsonce.Processor {
	t.Helper()
	cfg := b.cfg
	cfg.Target = tg
	cfg.Key = sqsonce.KeyFromBody("/orderId")
	p, err := sqsonce.NewConsumer(cfg, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

// record is an SQS record from the orders queue, as Lambda delivers it.
func record(id, body string, attrs map[string]events.SQSMessageAttribute) events.SQSMessage {
	return events.SQSMessage{
		MessageId: id, ReceiptHandle: "rh-" + id, Body: body,
		Attributes:        map[string]string{"ApproximateReceiveCount": "1"},
		MessageAttributes: attrs,
		EventSource:       "aws:sqs", EventSourceARN: ordersARN, AWSRegion: "us-east-1",
	}
}

// orderRecord is order orderID, with a String and a Number attribute that
// the destination must receive intact.
func orderRecord(id, orderID string) events.SQSMessage {
	return record(id, fmt.Sprintf(`{"orderId":%q}`, orderID), map[string]events.SQSMessageAttribute{
		"tenant": {DataType: "String", StringValue: aws.String("acme")},
		"amount": {DataType: "Number.float", StringValue: aws.String("12.50")},
	})
}

// handleWith runs records through p as one event and returns the ids it
// reported failed.
func handleWith(t *testing.T, p *sqsonce.Processor, records ...events.SQSMessage) []string {
	t.Helper()
	resp, err := p.Handle(context.Background(), events.SQSEvent{Records: records})
	if err != nil {
		t.Fatalf("Handle returned an error, which would fail the whole batch: %v", err)
	}
	ids := []string{}
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

// deliverTwice is the acceptance run of targets: a batch whose keys repeat
// is delivered (the record that lost the race for its key is retried), then
// SQS delivers every message again with new ids, as a producer's retry
// would.
func deliverTwice(t *testing.T, p *sqsonce.Processor) {
	t.Helper()
	first := []events.SQSMessage{orderRecord("m1", "o-1"), orderRecord("m2", "o-2"), orderRecord("m3", "o-1"), orderRecord("m4", "o-3")}
	failed := handleWith(t, p, first...)
	for _, id := range failed {
		if id != "m1" && id != "m3" {
			t.Errorf("%s failed in the first batch: only one of m1 and m3 (same key) may wait", id)
		}
	}
	var again []events.SQSMessage
	for _, r := range first {
		if slices.Contains(failed, r.MessageId) {
			again = append(again, r)
		}
		again = append(again, orderRecord("re-"+r.MessageId, strings.Split(r.Body, `"`)[3]))
	}
	if failed := handleWith(t, p, again...); len(failed) != 0 {
		t.Errorf("second delivery failed %v; every key is done", failed)
	}
}

func attr(m sqstypes.Message, name string) string {
	return aws.ToString(m.MessageAttributes[name].StringValue)
}

// reasonOf is the reason the processor gave a message it forwarded to the
// operator queue.
func reasonOf(m sqstypes.Message) string { return attr(m, sqsmsg.AttrReason) }

// metricCounts are what CloudWatch's Sum would show: "Metric" per function,
// and "Metric/reason" per function and reason; any other is 0.
type metricCounts map[string]float64

// checkProcMetrics checks the EMF lines b's processors wrote over n
// invocations since from (metricstest.Check), and their sums.
func checkProcMetrics(t *testing.T, b *bundle, from time.Time, n int, want metricCounts) {
	t.Helper()
	units := map[string]metrics.Unit{}
	for _, m := range []sqsonce.Kind{sqsonce.KindProcessed, sqsonce.KindUnrecordedCompletion, sqsonce.KindDuplicate,
		sqsonce.KindInProgress, sqsonce.KindInProgressDropped, sqsonce.KindForwardedToOperator, sqsonce.KindFailed, sqsonce.KindAlreadyStarted} {
		units[string(m)] = metrics.Count
	}
	units[metrics.LockLost], units[metrics.BackoffApplied] = metrics.Count, metrics.Count
	docs := metricstest.Check(t, b.metrics.String(), metricstest.Spec{
		Function: function, From: from, To: b.clock.Now(), Invocations: n, Units: units,
		Base: []string{string(sqsonce.KindProcessed), string(sqsonce.KindDuplicate), string(sqsonce.KindInProgress),
			string(sqsonce.KindUnrecordedCompletion), metrics.LockLost, metrics.BackoffApplied},
		Extra: []string{metrics.DimensionReason},
	})
	metricstest.CheckSums(t, docs, function, want)
}

// arrivedOncePerKey asserts the queue got each order exactly once, with its
// attributes and key.
func arrivedOncePerKey(t *testing.T, cfg aws.Config, queue string, body func(sqstypes.Message) string) {
	t.Helper()
	got := mototest.Receive(t, cfg, queue, 4, 4*time.Second)
	count := map[string]int{}
	for _, m := range got {
		count[body(m)]++
	}
	for _, o := range []string{"o-1", "o-2", "o-3"} {
		if count[o] != 1 {
			t.Errorf("order %s arrived %d times, want exactly once (arrivals %v)", o, count[o], count)
		}
	}
}

func rawOrder(t *testing.T) func(sqstypes.Message) string {
	return func(m sqstypes.Message) string {
		var o struct{ OrderID string }
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &o); err != nil {
			t.Errorf("body %q: %v", aws.ToString(m.Body), err)
		}
		if attr(m, "tenant") != "acme" || aws.ToString(m.MessageAttributes["amount"].DataType) != "Number.float" {
			t.Errorf("attributes not intact: %v", m.MessageAttributes)
		}
		if k := attr(m, targets.AttrKey); k != o.OrderID {
			t.Errorf("%s = %q, want %q", targets.AttrKey, k, o.OrderID)
		}
		return o.OrderID
	}
}

func TestTargetSQSExactlyOncePerKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dest := mototest.NewQueue(t, b.aws, false, nil)
	tg, err := targets.ToQueue(b.aws, dest)
	if err != nil {
		t.Fatal(err)
	}
	deliverTwice(t, withTarget(t, b, tg))
	arrivedOncePerKey(t, b.aws, dest, rawOrder(t))
}

func TestTargetSNSExactlyOncePerKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	topic, queue := mototest.NewTopicToQueue(t, b.aws, false)
	tg, err := targets.ToTopic(b.aws, topic)
	if err != nil {
		t.Fatal(err)
	}
	deliverTwice(t, withTarget(t, b, tg))
	arrivedOncePerKey(t, b.aws, queue, rawOrder(t))
}

func eventOrder(t *testing.T) func(sqstypes.Message) string {
	return func(m sqstypes.Message) string {
		var ev struct {
			Detail struct {
				OrderID string `json:"orderId"`
				SQSOnce struct {
					Key string `json:"key"`
				} `json:"sqsOnce"`
			} `json:"detail"`
		}
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err != nil {
			t.Errorf("event %q: %v", aws.ToString(m.Body), err)
		}
		if ev.Detail.SQSOnce.Key != ev.Detail.OrderID {
			t.Errorf("detail key %q, want %q", ev.Detail.SQSOnce.Key, ev.Detail.OrderID)
		}
		return ev.Detail.OrderID
	}
}

// ordersBus is an events target on a new bus whose events with source
// orders-app land in the returned queue.
func ordersBus(t *testing.T, b *bundle) (sqsonce.Target, string) {
	t.Helper()
	bus, queue := mototest.NewBusToQueue(t, b.aws, "orders-app")
	tg, err := targets.ToBus(b.aws, bus, "orders-app", "")
	if err != nil {
		t.Fatal(err)
	}
	return tg, queue
}

func TestTargetEventsExactlyOncePerKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tg, queue := ordersBus(t, b)
	deliverTwice(t, withTarget(t, b, tg))
	arrivedOncePerKey(t, b.aws, queue, eventOrder(t))
}

// A message the destination can never take (an event over EventBridge's
// 256 KiB) goes to the operator queue with reason target-refused, and fails
// no other record of the batch.
func TestTargetRefusalGoesToTheOperatorQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	operator := mototest.NewQueue(t, b.aws, false, nil)
	b.cfg.OperatorQueueURL = operator
	tg, queue := ordersBus(t, b)
	p := withTarget(t, b, tg)
	big := record("big", fmt.Sprintf(`{"orderId":"o-big","pad":%q}`, strings.Repeat("x", 300<<10)), nil)
	if failed := handleWith(t, p, orderRecord("m1", "o-1"), big, orderRecord("m2", "o-2")); len(failed) != 0 {
		t.Fatalf("failed %v, want none: the refused record is forwarded, the others delivered", failed)
	}
	fwd := mototest.Receive(t, b.aws, operator, 1, 3*time.Second)
	if len(fwd) != 1 || reasonOf(fwd[0]) != string(sqsonce.ReasonTargetRefused) {
		t.Fatalf("operator queue got %v, want the big record with reason %s", fwd, sqsonce.ReasonTargetRefused)
	}
	if got := mototest.Receive(t, b.aws, queue, 2, 3*time.Second); len(got) != 2 {
		t.Errorf("%d events arrived, want the 2 others", len(got))
	}
	checkProcMetrics(t, b, b.clock.Now(), 1, metricCounts{"Processed": 2, "ForwardedToOperator": 1, "ForwardedToOperator/target-refused": 1})
}

// lambdaTarget is a processor invoking a moto function through a fault
// proxy, which counts the invocations.
func lambdaTarget(t *testing.T, b *bundle) (*sqsonce.Processor, *faultproxy.Proxy) {
	t.Helper()
	fn := mototest.NewFunction(t, b.aws)
	p, err := faultproxy.Start(mototest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	via := b.aws.Copy()
	via.BaseEndpoint = aws.String(p.URL)
	tg, err := targets.ToFunction(via, fn)
	if err != nil {
		t.Fatal(err)
	}
	return withTarget(t, b, tg), p
}

// The consumer's partial batch response fails exactly the records it
// names: they are retried (and invoked again), the others completed (and
// never invoked again).
func TestTargetLambdaBatchItemFailures(t *testing.T) {
	b := setup(t)
	h, p := lambdaTarget(t, b)
	mototest.QueueInvokeResults(t, b.aws, `{"batchItemFailures":[{"itemIdentifier":"m2"}]}`)
	batch := []events.SQSMessage{orderRecord("m1", "o-1"), orderRecord("m2", "o-2"), orderRecord("m3", "o-3")}
	if failed := handleWith(t, h, batch...); !slices.Equal(failed, []string{"m2"}) {
		t.Fatalf("failed %v, want [m2] as the consumer said", failed)
	}
	if n := p.Stats().Forwarded["Invoke"]; n != 1 {
		t.Fatalf("%d invocations, want one for the batch", n)
	}
	// SQS delivers all three again: only o-2 reaches the consumer.
	if failed := handleWith(t, h, batch...); len(failed) != 0 {
		t.Fatalf("failed %v on redelivery", failed)
	}
	if n := p.Stats().Forwarded["Invoke"]; n != 2 {
		t.Errorf("%d invocations, want 2: o-2 again, o-1 and o-3 never", n)
	}
}

// A function error fails every record of the invocation, and releases
// them: the next delivery invokes the consumer again at once.
func TestTargetLambdaFunctionErrorRetriesAll(t *testing.T) {
	b := setup(t)
	h, p := lambdaTarget(t, b)
	hdr := http.Header{}
	hdr.Set("X-Amz-Function-Error", "Unhandled")
	p.Script("Invoke", faultproxy.AnswerAfter(http.StatusOK, hdr, []byte(`{"errorMessage":"db down"}`)))
	batch := []events.SQSMessage{orderRecord("m1", "o-1"), orderRecord("m2", "o-2")}
	if failed := handleWith(t, h, batch...); len(failed) != 2 {
		t.Fatalf("failed %v, want both", failed)
	}
	if failed := handleWith(t, h, batch...); len(failed) != 0 {
		t.Fatalf("failed %v after the consumer recovered", failed)
	}
	if n := p.Stats().Forwarded["Invoke"]; n != 2 {
		t.Errorf("%d invocations, want 2", n)
	}
}

// An Invoke whose answer is lost may have run the consumer: the records
// are retried but their locks kept, so a redelivery before the lock
// expires does not invoke the consumer a second time; after it, it does.
func TestTargetLambdaUnknownOutcomeKeepsTheLock(t *testing.T) {
	b := setup(t)
	h, p := lambdaTarget(t, b)
	from := b.clock.Now()
	p.Script("Invoke", faultproxy.ResetAfter)
	batch := []events.SQSMessage{orderRecord("m1", "o-1")}
	if failed := handleWith(t, h, batch...); len(failed) != 1 {
		t.Fatalf("failed %v, want m1 retried", failed)
	}
	if failed := handleWith(t, h, batch...); len(failed) != 1 {
		t.Fatalf("failed %v, want m1 still waiting for its lock", failed)
	}
	if n := p.Stats().Forwarded["Invoke"]; n != 1 {
		t.Fatalf("%d invocations, want 1 while the lock is held", n)
	}
	b.clock.Advance(2 * time.Minute) // past LOCK_TIMEOUT (60 s)
	if failed := handleWith(t, h, batch...); len(failed) != 0 {
		t.Fatalf("failed %v after the lock expired", failed)
	}
	if n := p.Stats().Forwarded["Invoke"]; n != 2 {
		t.Errorf("%d invocations, want 2", n)
	}
	if !strings.Contains(b.logs.String(), "delivery-unknown") {
		t.Errorf("no delivery-unknown log line:\n%s", b.logs)
	}
	// Unknown, then held by that lock, then delivered.
	checkProcMetrics(t, b, from, 3, metricCounts{"Failed": 1, "Failed/delivery-unknown": 1, "InProgress": 1, "Processed": 1})
}
