//go:build integration

package templatetest

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/samstack"
	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/local/localesm"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/replay"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// business records the side effects of the processor's business handler and
// fails the messages whose body is in poison.
type business struct {
	mu     sync.Mutex
	calls  map[string]int // by body
	poison map[string]bool
}

func (b *business) handle(_ context.Context, msg events.SQSMessage) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls[msg.Body]++
	if b.poison[msg.Body] {
		return errors.New("downstream unavailable")
	}
	return nil
}

func (b *business) count(body string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[body]
}

func (b *business) heal(body string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.poison, body)
}

// stackBundle is a deployed stack with its two handlers built exactly as
// cmd/processor and cmd/dlq-replayer build them, from the environment the
// deployed functions have.
type stackBundle struct {
	st                     *samstack.Stack
	sqs                    *sqs.Client
	ddb                    *dynamodb.Client
	mainURL, dlqURL, opURL string
	mainARN, dlqARN        string
	processor              *sqsonce.Processor
	replayer               *replay.Handler
	business               *business
	keyPrefix              string
	maxReceiveCount        int
	processorCfg           sqsonce.ConsumerConfig
	ctx                    context.Context
}

func setupStack(t *testing.T, params map[string]string) *stackBundle {
	t.Helper()
	st := deploy(t, params)
	cfg := mototest.Config(t)
	b := &stackBundle{
		st: st, sqs: sqs.NewFromConfig(cfg), ddb: dynamodb.NewFromConfig(cfg),
		business: &business{calls: map[string]int{}, poison: map[string]bool{}},
		ctx:      testContext(t, 2*time.Minute),
	}
	for key, dst := range map[string]*string{
		"MainQueueUrl": &b.mainURL, "DeadLetterQueueUrl": &b.dlqURL, "OperatorQueueUrl": &b.opURL,
		"MainQueueArn": &b.mainARN, "DeadLetterQueueArn": &b.dlqARN,
	} {
		v, err := st.Output(key)
		if err != nil {
			t.Fatal(err)
		}
		*dst = v
	}
	pcfg, err := processorConfig(envconfig.Map(lambdaEnv(st.Functions[processorID])), cfg)
	if err != nil {
		t.Fatalf("processor config from the deployed environment: %v", err)
	}
	if pcfg.Target != nil {
		t.Fatalf("the stack's processor has a Target (%s): these tests run its handler", st.Parameters["Target"])
	}
	rcfg, err := replay.LoadConfig(envconfig.Map(lambdaEnv(st.Functions[replayerID])))
	if err != nil {
		t.Fatalf("replayer config from the deployed environment: %v", err)
	}
	b.processorCfg = pcfg
	if b.processor, err = sqsonce.NewConsumer(pcfg, b.business.handle); err != nil {
		t.Fatal(err)
	}
	b.replayer = replay.NewHandler(rcfg, cfg)
	b.keyPrefix = pcfg.KeyPrefix
	b.maxReceiveCount, _ = strconv.Atoi(st.Parameters["MaxReceiveCount"])
	return b
}

func (b *stackBundle) send(t *testing.T, body string) string {
	t.Helper()
	out, err := b.sqs.SendMessage(b.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(b.mainURL), MessageBody: aws.String(body)})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.MessageId)
}

// receive takes want messages off a queue and builds the event Lambda would
// deliver for them.
func (b *stackBundle) receive(t *testing.T, url, arn string, want int) events.SQSEvent {
	t.Helper()
	msgs := mototest.Receive(t, mototest.Config(t), url, want, 10*time.Second)
	if len(msgs) != want {
		t.Fatalf("%d messages on %s, want %d", len(msgs), url, want)
	}
	ev, err := localesm.NewEvent(msgs, arn, mototest.Config(t).Region)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// settle does what Lambda does after an invocation: deletes the records not
// reported failed.
func (b *stackBundle) settle(t *testing.T, url string, ev events.SQSEvent, resp events.SQSEventResponse) {
	t.Helper()
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for _, r := range ev.Records {
		if failed[r.MessageId] {
			continue
		}
		if _, err := b.sqs.DeleteMessage(b.ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String(r.ReceiptHandle)}); err != nil {
			t.Fatal(err)
		}
	}
}

func (b *stackBundle) record(t *testing.T, key string) map[string]ddbtypes.AttributeValue {
	t.Helper()
	out, err := b.ddb.GetItem(b.ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(b.processorCfg.Store.(*dynamostore.Store).Table()),
		Key:            map[string]ddbtypes.AttributeValue{dynamostore.AttrID: &ddbtypes.AttributeValueMemberS{Value: store.RecordID(b.keyPrefix, key)}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func status(item map[string]ddbtypes.AttributeValue) string {
	if s, ok := item[dynamostore.AttrStatus].(*ddbtypes.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

func failures(resp events.SQSEventResponse) []string {
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

func TestProcessorOnDeployedStackProcessesOnce(t *testing.T) {
	t.Parallel()
	b := setupStack(t, nil)

	id := b.send(t, `{"orderId":"o-1"}`)
	ev := b.receive(t, b.mainURL, b.mainARN, 1)
	resp, err := b.processor.Handle(b.ctx, ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("first delivery: failures %v, err %v", failures(resp), err)
	}
	b.settle(t, b.mainURL, ev, resp)
	if n := b.business.count(`{"orderId":"o-1"}`); n != 1 {
		t.Fatalf("business ran %d times, want 1", n)
	}
	rec := b.record(t, id)
	if status(rec) != string(store.StatusCompleted) {
		t.Fatalf("record %s#%s = %v, want COMPLETED", b.keyPrefix, id, rec)
	}
	if _, ok := rec[dynamostore.AttrExpiresAt]; !ok {
		t.Error("completed record has no expiresAt, the table's TTL attribute")
	}

	// SQS delivers at least once: the same message again is a duplicate,
	// reported done so SQS deletes it, and the business does not run again.
	resp, err = b.processor.Handle(b.ctx, ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("second delivery: failures %v, err %v", failures(resp), err)
	}
	if n := b.business.count(`{"orderId":"o-1"}`); n != 1 {
		t.Errorf("business ran %d times after a duplicate delivery, want 1", n)
	}
}

func TestDeadLetterReplayedToDeployedMainQueue(t *testing.T) {
	t.Parallel()
	// Replays without delay, so the test needs no waiting.
	b := setupStack(t, map[string]string{"MaxReceiveCount": "2", "MaxDelay": "0"})
	const body = `{"orderId":"o-poison"}`
	b.business.poison[body] = true
	original := b.send(t, body)

	// The processor fails it MaxReceiveCount times; SQS's redrive policy
	// then moves it to the dead-letter queue.
	for i := range b.maxReceiveCount {
		ev := b.receive(t, b.mainURL, b.mainARN, 1)
		resp, err := b.processor.Handle(b.ctx, ev)
		if err != nil || len(resp.BatchItemFailures) != 1 {
			t.Fatalf("attempt %d: failures %v, err %v; want the record failed", i+1, failures(resp), err)
		}
		b.settle(t, b.mainURL, ev, resp)
		// Stands in for the visibility timeout running out.
		if _, err := b.sqs.ChangeMessageVisibility(b.ctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl: aws.String(b.mainURL), ReceiptHandle: aws.String(ev.Records[0].ReceiptHandle), VisibilityTimeout: 0,
		}); err != nil {
			t.Fatal(err)
		}
	}
	if s := status(b.record(t, original)); s != "" && s != string(store.StatusReleased) {
		t.Errorf("a failed message left a lock behind: status %q", s)
	}
	if got := mototest.Receive(t, mototest.Config(t), b.mainURL, 1, 2*time.Second); len(got) != 0 {
		t.Fatalf("message still on the main queue after %d receives: redrive policy not applied", b.maxReceiveCount)
	}

	dead := b.receive(t, b.dlqURL, b.dlqARN, 1)
	if dead.Records[0].MessageId != original {
		t.Fatalf("dead letter %s, want %s", dead.Records[0].MessageId, original)
	}
	resp, err := b.replayer.Handle(b.ctx, dead)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("replay: failures %v, err %v", failures(resp), err)
	}
	b.settle(t, b.dlqURL, dead, resp)

	// Back on the main queue: the first replay, carrying the original id.
	// Every copy there is taken: a replay whose answer was lost after SQS
	// applied it is sent again by the SDK, and a standard queue keeps both
	// (internal/replay's TestLostReplayAnswerMakesACopyTheProcessorSuppresses;
	// seen here on a loaded machine, where the shared moto_server answers
	// errors). Both carry the original id; the processor runs the key once.
	// The replayer's Handle has returned, so every copy is on the queue:
	// the first as the test has always waited for it, then the rest.
	msgs := mototest.Receive(t, mototest.Config(t), b.mainURL, 1, 10*time.Second)
	if len(msgs) == 0 {
		t.Fatal("no replay on the main queue")
	}
	msgs = append(msgs, mototest.Receive(t, mototest.Config(t), b.mainURL, 10, time.Second)...)
	replayed, err := localesm.NewEvent(msgs, b.mainARN, mototest.Config(t).Region)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range replayed.Records {
		if r.Body != body || r.MessageId == original {
			t.Fatalf("replayed %+v", r)
		}
		for name, want := range map[string]string{sqsmsg.AttrReplayCount: "1", sqsmsg.AttrOriginalMessageID: original} {
			if a, ok := r.MessageAttributes[name]; !ok || aws.ToString(a.StringValue) != want {
				t.Errorf("attribute %s = %+v, want %s", name, a, want)
			}
		}
	}

	// The downstream recovered: the replay is processed, keyed by the
	// original message id, exactly once however many copies arrived.
	b.business.heal(body)
	resp, err = b.processor.Handle(b.ctx, replayed)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("processing the replay: failures %v, err %v", failures(resp), err)
	}
	b.settle(t, b.mainURL, replayed, resp)
	if n := b.business.count(body); n != b.maxReceiveCount+1 {
		t.Errorf("business ran %d times, want %d: %d failures and 1 success", n, b.maxReceiveCount+1, b.maxReceiveCount)
	}
	if s := status(b.record(t, original)); s != string(store.StatusCompleted) {
		t.Errorf("record of the original id is %q, want COMPLETED", s)
	}
	for _, url := range []string{b.mainURL, b.dlqURL, b.opURL} {
		if got := mototest.Receive(t, mototest.Config(t), url, 1, time.Second); len(got) != 0 {
			t.Errorf("%s still holds %d messages", url, len(got))
		}
	}
}
