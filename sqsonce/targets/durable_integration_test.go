//go:build integration

package targets_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/sqs-once/sqs-once/internal/local/durablestub"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store/memstore"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// The durable target against durablestub, a local stand-in of Lambda's
// durable Invoke (moto_server has none), through the real SDK client: what
// these tests check is what the client really sends and how the target
// reads the answers AWS documents. They say nothing of AWS itself.

// durableNameRule is DurableExecutionName's rule in Lambda's API reference.
var durableNameRule = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

const durableQueueARN = "arn:aws:sqs:us-east-1:123456789012:orders"

// durableSetup is a stub and a durable target of function orders:live
// pointed at it.
func durableSetup(t *testing.T) (*durablestub.Stub, *targets.DurableTarget) {
	t.Helper()
	stub, err := durablestub.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stub.Close() })
	cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(stub.URL),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}
	tg, err := targets.ToDurableFunction(cfg, "orders", "live")
	if err != nil {
		t.Fatal(err)
	}
	tg.Logger = quiet
	return stub, tg
}

// durableName is the name a durable target gives the execution of key.
func durableName(key string) string {
	name, _ := targets.Spec{Kind: targets.Durable}.ExecutionName(key)
	return name
}

func bodyHash(body string) string {
	sum := sha256.Sum256([]byte(body))
	return hex.EncodeToString(sum[:])
}

// delivery is one receive of message id with body under key: receive
// counts and receipt handles as SQS gives them, different every time.
func delivery(id, key, body string, receive int) sqsonce.Delivery {
	return sqsonce.Delivery{
		Record: events.SQSMessage{
			MessageId:     id,
			ReceiptHandle: "rh-" + id + "-" + strconv.Itoa(receive),
			Body:          body,
			Attributes: map[string]string{
				"ApproximateReceiveCount":          strconv.Itoa(receive),
				"ApproximateFirstReceiveTimestamp": "1700000000500",
				"SentTimestamp":                    "1700000000000",
			},
			EventSource:    "aws:sqs",
			EventSourceARN: durableQueueARN,
			AWSRegion:      "us-east-1",
		},
		Key:         key,
		Fence:       int64(1000 + receive),
		RecordKey:   key,
		PayloadHash: bodyHash(body),
	}
}

// durableKeys are the key shapes the names must carry: short, at and past
// the 64-character limit, Unicode, characters outside the alphabet, one
// shaped like a hashed name, and the SHA-256 hex a HashKeys record holds.
var durableKeys = []string{
	"order-1",
	strings.Repeat("k", 64),
	strings.Repeat("k", 65),
	strings.Repeat("é", 40),
	"commande/été 🚀:42",
	"tenant:1/order:2",
	"x-0123456789abcdef0123456789abcdef",
	sqsonce.HashKey("order-1"),
}

// TestDurableRequestsCarryAValidName: every key shape's Invoke carries a
// DurableExecutionName Lambda accepts, the one the mapping gives, distinct
// per key; asynchronous, on the qualified function; a redelivery (another
// receipt handle, receive count and fence) sends the same payload, so that
// the stub, as Lambda, returns the execution started and starts none.
func TestDurableRequestsCarryAValidName(t *testing.T) {
	t.Parallel()
	stub, tg := durableSetup(t)
	msgs := func(receive int) []sqsonce.Delivery {
		var ds []sqsonce.Delivery
		for i, k := range durableKeys {
			ds = append(ds, delivery("m-"+strconv.Itoa(i), k, `{"n":`+strconv.Itoa(i)+`}`, receive))
		}
		return ds
	}
	for receive := 1; receive <= 2; receive++ {
		for i, err := range tg.Deliver(context.Background(), msgs(receive)) {
			if err != nil {
				t.Fatalf("receive %d, key %q: %v", receive, durableKeys[i], err)
			}
		}
	}
	invokes := stub.Invokes()
	if len(invokes) != 2*len(durableKeys) {
		t.Fatalf("%d Invokes, want %d", len(invokes), 2*len(durableKeys))
	}
	names := map[string]string{}
	for _, in := range invokes {
		if !durableNameRule.MatchString(in.Name) {
			t.Errorf("DurableExecutionName %q breaks Lambda's rule", in.Name)
		}
		if in.Function != "orders" || in.Qualifier != "live" || in.InvocationType != "Event" {
			t.Errorf("Invoke of %s:%s, %s; want orders:live, Event", in.Function, in.Qualifier, in.InvocationType)
		}
		var p struct {
			Records []map[string]any
			SQSOnce struct{ Key, PayloadHash string } `json:"sqsOnce"`
		}
		if err := json.Unmarshal(in.Payload, &p); err != nil || len(p.Records) != 1 {
			t.Fatalf("payload %s: %v, want one record", in.Payload, err)
		}
		key := p.SQSOnce.Key
		if want := durableName(key); in.Name != want {
			t.Errorf("key %q named %q, want %q", key, in.Name, want)
		}
		if other, ok := names[in.Name]; ok && other != key {
			t.Errorf("keys %q and %q share the name %q", key, other, in.Name)
		}
		names[in.Name] = key
		if p.SQSOnce.PayloadHash != bodyHash(p.Records[0]["body"].(string)) {
			t.Errorf("payloadHash %q is not the body's", p.SQSOnce.PayloadHash)
		}
		if rh := p.Records[0]["receiptHandle"]; rh != "" {
			t.Errorf("receiptHandle %v in the input: it changes from one receive to the next", rh)
		}
	}
	if long := durableName(strings.Repeat("k", 65)); len(long) != 64 || long == strings.Repeat("k", 64) {
		t.Errorf("a 65-character key named %q: want a hashed name of 64", long)
	}
	execs := stub.Executions()
	if len(execs) != len(durableKeys) || stub.Refusals() != 0 {
		t.Fatalf("%d executions, %d refusals; want one per key (%d), none refused", len(execs), stub.Refusals(), len(durableKeys))
	}
	for name, e := range execs {
		if e.Invokes != 2 {
			t.Errorf("execution %s invoked %d times with its payload, want 2: the redelivery's input differed", name, e.Invokes)
		}
	}
}

// TestDurableAlreadyStarted: another message of the same key and body (its
// own message id, so another input) finds the name taken: Lambda refuses
// it, the target reads the execution back, and its payload hash makes it
// this key's execution. Another body under the key is a payload mismatch.
func TestDurableAlreadyStarted(t *testing.T) {
	t.Parallel()
	stub, tg := durableSetup(t)
	ctx := context.Background()
	if err := tg.Deliver(ctx, []sqsonce.Delivery{delivery("m-1", "order-1", `{"a":1}`, 1)})[0]; err != nil {
		t.Fatal(err)
	}
	err := tg.Deliver(ctx, []sqsonce.Delivery{delivery("m-2", "order-1", `{"a":1}`, 1)})[0]
	if !errors.Is(err, sqsonce.ErrAlreadyStarted) || errors.Is(err, sqsonce.ErrPayloadMismatch) {
		t.Fatalf("a second message of the key and body: %v, want ErrAlreadyStarted", err)
	}
	err = tg.Deliver(ctx, []sqsonce.Delivery{delivery("m-3", "order-1", `{"a":2}`, 1)})[0]
	if !errors.Is(err, sqsonce.ErrPayloadMismatch) || errors.Is(err, sqsonce.ErrAlreadyStarted) {
		t.Fatalf("another body under the key: %v, want ErrPayloadMismatch", err)
	}
	// A name taken by an execution someone else started, without sqs-once's
	// member: not this payload's.
	stub.Put("orders", "live", durableName("order-9"), []byte(`{"hello":"world"}`))
	if err := tg.Deliver(ctx, []sqsonce.Delivery{delivery("m-9", "order-9", `{"a":1}`, 1)})[0]; !errors.Is(err, sqsonce.ErrPayloadMismatch) {
		t.Fatalf("a name taken by a foreign execution: %v, want ErrPayloadMismatch", err)
	}
	// The name filter matches names that contain it: the target picks out
	// its own. order-1x contains order-1.
	stub.Put("orders", "live", "order-1x", []byte(`{}`))
	if err := tg.Deliver(ctx, []sqsonce.Delivery{delivery("m-4", "order-1", `{"a":1}`, 1)})[0]; !errors.Is(err, sqsonce.ErrAlreadyStarted) {
		t.Fatalf("with a second name containing the key's: %v, want ErrAlreadyStarted", err)
	}
	if n := len(stub.Executions()); n != 3 {
		t.Errorf("%d executions, want 3 (order-1 once, and the two put)", n)
	}
}

// TestDurableSynchronous invokes with RequestResponse: the record
// succeeds when the execution did; a function error fails it, as a lambda
// target's; a taken name whose execution of this payload ended failed
// fails it too, one that succeeded or still runs is already started.
func TestDurableSynchronous(t *testing.T) {
	t.Parallel()
	stub, tg := durableSetup(t)
	tg.Synchronous = true
	ctx := context.Background()
	if err := tg.Deliver(ctx, []sqsonce.Delivery{delivery("m-1", "k", `{}`, 1)})[0]; err != nil {
		t.Fatal(err)
	}
	if in := stub.Invokes(); len(in) != 1 || in[0].InvocationType != "RequestResponse" {
		t.Fatalf("invokes %+v, want one RequestResponse", in)
	}
	stub.FailSynchronous("Unhandled")
	err := tg.Deliver(ctx, []sqsonce.Delivery{delivery("m-2", "k2", `{}`, 1)})[0]
	if !errors.Is(err, targets.ErrFunctionError) || errors.Is(err, sqsonce.ErrTargetRefused) || errors.Is(err, sqsonce.ErrAlreadyStarted) {
		t.Fatalf("a failed execution: %v, want ErrFunctionError, to retry", err)
	}
	stub.FailSynchronous("")
	// Another message of the key (its own message id) meets the name.
	for status, want := range map[string]error{"FAILED": targets.ErrFunctionError, "TIMED_OUT": targets.ErrFunctionError, "SUCCEEDED": sqsonce.ErrAlreadyStarted, "RUNNING": sqsonce.ErrAlreadyStarted} {
		stub.SetStatus(durableName("k2"), status)
		if err := tg.Deliver(ctx, []sqsonce.Delivery{delivery("m-3", "k2", `{}`, 1)})[0]; !errors.Is(err, want) {
			t.Errorf("the key's execution %s: %v, want %v", status, err, want)
		}
	}
	tg.Synchronous = false
	stub.SetStatus(durableName("k2"), "FAILED")
	if err := tg.Deliver(ctx, []sqsonce.Delivery{delivery("m-3", "k2", `{}`, 1)})[0]; !errors.Is(err, sqsonce.ErrAlreadyStarted) {
		t.Errorf("asynchronous, the key's execution FAILED: %v, want ErrAlreadyStarted (the start is what the target promises)", err)
	}
}

// crashAfterStart is a durable target whose processor dies once the
// execution has started and before its completion is written: the record
// keeps its lock, as after a crash, until the lock expires.
type crashAfterStart struct {
	*targets.DurableTarget
	mu      sync.Mutex
	crashes int
}

func (c *crashAfterStart) Deliver(ctx context.Context, msgs []sqsonce.Delivery) []error {
	errs := c.DurableTarget.Deliver(ctx, msgs)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashes > 0 {
		c.crashes--
		for i := range errs {
			if errs[i] == nil {
				errs[i] = sqsonce.ErrOutcomeUnknown // the lock is kept, nothing completed
			}
		}
	}
	return errs
}

// TestDurableThroughTheProcessor: a processor with the durable target,
// crashed between the start and the completion, then the same message
// redelivered after its lock expired, and another message of the same key
// and body: one execution, the redelivery's record completed, the other
// message's counted AlreadyStarted, and nothing started twice.
func TestDurableThroughTheProcessor(t *testing.T) {
	t.Parallel()
	stub, dt := durableSetup(t)
	st := memstore.New()
	tg := &crashAfterStart{DurableTarget: dt, crashes: 1}
	var mu sync.Mutex
	kinds := map[sqsonce.Kind]int{}
	cfg := sqsonce.ConsumerConfig{Config: sqsonce.Config{
		Store: st, KeyPrefix: "test", LockTimeout: time.Minute, DedupeWindow: time.Hour, Logger: quiet,
		HashKeys: true,
		OnOutcome: func(_ context.Context, o sqsonce.Outcome) {
			mu.Lock()
			kinds[o.Kind]++
			mu.Unlock()
		},
		Test: sqsonce.TestConfig{Now: st.Now},
	}, AWS: nowhere, Target: tg, Key: sqsonce.KeyFromBody("/orderId")}
	p, err := sqsonce.NewConsumer(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	handle := func(d sqsonce.Delivery) []events.SQSBatchItemFailure {
		t.Helper()
		resp, err := p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{d.Record}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.BatchItemFailures
	}
	body := `{"orderId":"o-1","total":3}`
	if failed := handle(delivery("m-1", "", body, 1)); len(failed) != 1 {
		t.Fatalf("the crashed delivery: failures %v, want its record failed", failed)
	}
	st.Advance(2 * time.Minute) // the crashed processor's lock expires
	if failed := handle(delivery("m-1", "", body, 2)); len(failed) != 0 {
		t.Fatalf("the redelivery after the crash: failures %v, want none", failed)
	}
	// Another key crashed the same way, then another message of the same
	// key and body (its own message id): taken over, refused by name,
	// judged this payload's execution.
	tg.mu.Lock()
	tg.crashes = 1
	tg.mu.Unlock()
	body2 := `{"orderId":"o-2"}`
	if failed := handle(delivery("m-3", "", body2, 1)); len(failed) != 1 {
		t.Fatalf("the second crashed delivery: failures %v, want its record failed", failed)
	}
	st.Advance(2 * time.Minute)
	if failed := handle(delivery("m-4", "", body2, 1)); len(failed) != 0 {
		t.Fatalf("another message of the crashed key: failures %v, want none", failed)
	}
	if failed := handle(delivery("m-3", "", body2, 2)); len(failed) != 0 {
		t.Fatalf("the crashed message's redelivery: failures %v, want none (a duplicate)", failed)
	}
	execs := stub.Executions()
	one, two := durableName(sqsonce.HashKey("o-1")), durableName(sqsonce.HashKey("o-2"))
	invoked := map[string]int{}
	for n, e := range execs {
		invoked[n] = e.Invokes
	}
	if len(execs) != 2 || execs[one].Invokes != 2 || execs[two].Invokes != 1 {
		t.Fatalf("executions (name: invokes) %v, want two: %s invoked twice with its payload (start, redelivery), %s once", invoked, one, two)
	}
	if stub.Refusals() != 1 || kinds[sqsonce.KindAlreadyStarted] != 1 || kinds[sqsonce.KindDuplicate] != 1 {
		t.Errorf("%d refusals, outcomes %v; want the other message refused by name and counted AlreadyStarted, the last a Duplicate", stub.Refusals(), kinds)
	}
}

// TestDurableFIFOGroupStopsAfterAFailure: on a FIFO source the starts are
// made in order, and a group whose start failed starts none of its later
// messages; another group goes on.
func TestDurableFIFOGroupStopsAfterAFailure(t *testing.T) {
	t.Parallel()
	stub, tg := durableSetup(t)
	stub.Put("orders", "live", durableName("k1"), []byte(`{}`)) // someone else's: a mismatch
	fifo := func(d sqsonce.Delivery, group string) sqsonce.Delivery {
		d.Record.EventSourceARN = durableQueueARN + ".fifo"
		d.Record.Attributes["MessageGroupId"] = group
		return d
	}
	errs := tg.Deliver(context.Background(), []sqsonce.Delivery{
		fifo(delivery("m-1", "k1", `{}`, 1), "g1"),
		fifo(delivery("m-2", "k2", `{}`, 1), "g1"),
		fifo(delivery("m-3", "k3", `{}`, 1), "g2"),
	})
	if !errors.Is(errs[0], sqsonce.ErrPayloadMismatch) || !errors.Is(errs[1], targets.ErrGroupBlocked) || errs[2] != nil {
		t.Fatalf("errors %v; want a mismatch, its group's next blocked, the other group started", errs)
	}
	if _, started := stub.Executions()[durableName("k2")]; started {
		t.Error("k2 started after its group's earlier start failed")
	}
}
