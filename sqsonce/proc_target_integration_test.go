//go:build integration

package sqsonce_test

import (
	"encoding/json"
	"fmt"
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
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// The targets of package sqsonce/targets, driven by a Processor against
// moto_server's queues, topics, buses and functions.

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
	b := procSetup(t, dynamoBackend)
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
	b := procSetup(t, dynamoBackend)
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
func ordersBus(t *testing.T, b *procBundle) (sqsonce.Target, string) {
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
	b := procSetup(t, dynamoBackend)
	tg, queue := ordersBus(t, b)
	deliverTwice(t, withTarget(t, b, tg))
	arrivedOncePerKey(t, b.aws, queue, eventOrder(t))
}

// A message the destination can never take (an event over EventBridge's
// 256 KiB) goes to the operator queue with reason target-refused, and fails
// no other record of the batch.
func TestTargetRefusalGoesToTheOperatorQueue(t *testing.T) {
	t.Parallel()
	b := procSetup(t, dynamoBackend)
	operator := mototest.NewQueue(t, b.aws, false, nil)
	b.cfg.OperatorQueueURL = operator
	tg, queue := ordersBus(t, b)
	p := withTarget(t, b, tg)
	big := procRecord("big", fmt.Sprintf(`{"orderId":"o-big","pad":%q}`, strings.Repeat("x", 300<<10)))
	if failed := handleWith(t, p, orderRecord("m1", "o-1"), big, orderRecord("m2", "o-2")); len(failed) != 0 {
		t.Fatalf("failed %v, want none: the refused record is forwarded, the others delivered", failed)
	}
	fwd := mototest.Receive(t, b.aws, operator, 1, 3*time.Second)
	if len(fwd) != 1 || reasonOf(fwd[0]) != sqsonce.ReasonTargetRefused {
		t.Fatalf("operator queue got %v, want the big record with reason %s", fwd, sqsonce.ReasonTargetRefused)
	}
	if got := mototest.Receive(t, b.aws, queue, 2, 3*time.Second); len(got) != 2 {
		t.Errorf("%d events arrived, want the 2 others", len(got))
	}
	checkProcMetrics(t, b, b.clock.Now(), 1, metricCounts{"Processed": 2, "ForwardedToOperator": 1, "ForwardedToOperator/target-refused": 1})
}

// lambdaTarget is a processor invoking a moto function through a fault
// proxy, which counts the invocations.
func lambdaTarget(t *testing.T, b *procBundle) (*sqsonce.Processor, *faultproxy.Proxy) {
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
	b := procSetup(t, dynamoBackend)
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
	b := procSetup(t, dynamoBackend)
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
	b := procSetup(t, dynamoBackend)
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
