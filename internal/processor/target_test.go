package processor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/processor"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/internal/target"
)

// withTarget is the bundle's handler delivering to spec instead of calling
// the business function, keyed on the order id.
func (b *bundle) withTarget(t *testing.T, spec string, awsCfg aws.Config, opts target.Options) *processor.Handler {
	t.Helper()
	s, err := target.ParseSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	tg, err := target.New(s, awsCfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	cfg := b.cfg
	cfg.Target = spec
	if cfg.Key, err = processor.ParseKeySource("body:/orderId"); err != nil {
		t.Fatal(err)
	}
	return mustNew(t, cfg, processor.Deps{
		DynamoDB: b.dynamo,
		SQS:      b.sqs,
		Target:   tg,
		Now:      b.clock.Now,
		Rand:     func() float64 { return 0.5 },
		Sleep:    func(context.Context, time.Duration) error { return nil },
		Logger:   slog.New(slog.NewJSONHandler(b.logs, nil)),
		Metrics:  b.metrics,

		FunctionName: testFunction,
	})
}

func handleWith(t *testing.T, h *processor.Handler, records ...events.SQSMessage) []string {
	t.Helper()
	resp, err := h.Handle(context.Background(), events.SQSEvent{Records: records})
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	return failedIDs(resp)
}

func order(id, orderID string) events.SQSMessage {
	return record(id, fmt.Sprintf(`{"orderId":%q}`, orderID), withAttr("tenant", "String", "acme"), withAttr("amount", "Number.float", "12.50"))
}

// deliverTwice is the acceptance run: a batch whose keys repeat is
// delivered (the record that lost the race for its key is retried), then
// SQS delivers every message again with new ids, as a producer's retry
// would. It returns the responses' failures.
func deliverTwice(t *testing.T, h *processor.Handler) {
	t.Helper()
	first := []events.SQSMessage{order("m1", "o-1"), order("m2", "o-2"), order("m3", "o-1"), order("m4", "o-3")}
	failed := handleWith(t, h, first...)
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
		again = append(again, order("re-"+r.MessageId, strings.Split(r.Body, `"`)[3]))
	}
	if failed := handleWith(t, h, again...); len(failed) != 0 {
		t.Errorf("second delivery failed %v; every key is done", failed)
	}
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
		if aws.ToString(m.MessageAttributes["tenant"].StringValue) != "acme" || aws.ToString(m.MessageAttributes["amount"].DataType) != "Number.float" {
			t.Errorf("attributes not intact: %v", m.MessageAttributes)
		}
		if k := aws.ToString(m.MessageAttributes[target.AttrKey].StringValue); k != o.OrderID {
			t.Errorf("%s = %q, want %q", target.AttrKey, k, o.OrderID)
		}
		return o.OrderID
	}
}

func TestTargetSQSExactlyOncePerKey(t *testing.T) {
	b := setup(t)
	dest := mototest.NewQueue(t, b.aws, false, nil)
	deliverTwice(t, b.withTarget(t, "sqs:"+dest, b.aws, target.Options{}))
	arrivedOncePerKey(t, b.aws, dest, rawOrder(t))
}

func TestTargetSNSExactlyOncePerKey(t *testing.T) {
	b := setup(t)
	topic, queue := mototest.NewTopicToQueue(t, b.aws, false)
	deliverTwice(t, b.withTarget(t, "sns:"+topic, b.aws, target.Options{}))
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

func TestTargetEventsExactlyOncePerKey(t *testing.T) {
	b := setup(t)
	bus, queue := mototest.NewBusToQueue(t, b.aws, "orders-app")
	deliverTwice(t, b.withTarget(t, "events:"+bus, b.aws, target.Options{EventSource: "orders-app"}))
	arrivedOncePerKey(t, b.aws, queue, eventOrder(t))
}

// A message the destination can never take (an event over EventBridge's
// 256 KiB) goes to the operator queue with reason target-refused, and fails
// no other record of the batch.
func TestTargetRefusalGoesToTheOperatorQueue(t *testing.T) {
	b := setup(t)
	operator := mototest.NewQueue(t, b.aws, false, nil)
	b.cfg.OperatorQueueURL = operator
	bus, queue := mototest.NewBusToQueue(t, b.aws, "orders-app")
	h := b.withTarget(t, "events:"+bus, b.aws, target.Options{EventSource: "orders-app"})
	big := record("big", fmt.Sprintf(`{"orderId":"o-big","pad":%q}`, strings.Repeat("x", 300<<10)))
	if failed := handleWith(t, h, order("m1", "o-1"), big, order("m2", "o-2")); len(failed) != 0 {
		t.Fatalf("failed %v, want none: the refused record is forwarded, the others delivered", failed)
	}
	fwd := mototest.Receive(t, b.aws, operator, 1, 3*time.Second)
	if len(fwd) != 1 || aws.ToString(fwd[0].MessageAttributes[sqsmsg.AttrReason].StringValue) != processor.ReasonTargetRefused {
		t.Fatalf("operator queue got %v, want the big record with reason %s", fwd, processor.ReasonTargetRefused)
	}
	if got := mototest.Receive(t, b.aws, queue, 2, 3*time.Second); len(got) != 2 {
		t.Errorf("%d events arrived, want the 2 others", len(got))
	}
	checkMetrics(t, b, b.clock.Now(), 1, counts{"Processed": 2, "ForwardedToOperator": 1, "ForwardedToOperator/target-refused": 1})
}

// lambdaTarget is a handler invoking a moto function through a fault
// proxy, which counts the invocations.
func (b *bundle) lambdaTarget(t *testing.T) (*processor.Handler, *faultproxy.Proxy) {
	t.Helper()
	fn := mototest.NewFunction(t, b.aws)
	p, err := faultproxy.Start(mototest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	via := b.aws.Copy()
	via.BaseEndpoint = aws.String(p.URL)
	return b.withTarget(t, "lambda:"+fn, via, target.Options{}), p
}

// The consumer's partial batch response fails exactly the records it
// names: they are retried (and invoked again), the others completed (and
// never invoked again).
func TestTargetLambdaBatchItemFailures(t *testing.T) {
	b := setup(t)
	h, p := b.lambdaTarget(t)
	mototest.QueueInvokeResults(t, b.aws, `{"batchItemFailures":[{"itemIdentifier":"m2"}]}`)
	batch := []events.SQSMessage{order("m1", "o-1"), order("m2", "o-2"), order("m3", "o-3")}
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
	h, p := b.lambdaTarget(t)
	hdr := http.Header{}
	hdr.Set("X-Amz-Function-Error", "Unhandled")
	p.Script("Invoke", faultproxy.AnswerAfter(http.StatusOK, hdr, []byte(`{"errorMessage":"db down"}`)))
	batch := []events.SQSMessage{order("m1", "o-1"), order("m2", "o-2")}
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
	h, p := b.lambdaTarget(t)
	from := b.clock.Now()
	p.Script("Invoke", faultproxy.ResetAfter)
	batch := []events.SQSMessage{order("m1", "o-1")}
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
	checkMetrics(t, b, from, 3, counts{"Failed": 1, "Failed/delivery-unknown": 1, "InProgress": 1, "Processed": 1})
}

// An sqs target that is the consumed queue would loop: refused with an
// invocation error naming both.
func TestTargetIsSourceRefused(t *testing.T) {
	b := setup(t)
	h := b.withTarget(t, "sqs:https://sqs.us-east-1.amazonaws.com/123456789012/orders", b.aws, target.Options{})
	_, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{order("m1", "o-1")}})
	if err == nil || !strings.Contains(err.Error(), "TARGET names the queue this function consumes") {
		t.Fatalf("Handle: %v, want ErrTargetIsSource", err)
	}
}
