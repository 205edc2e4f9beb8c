package processor_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqs-once/sqs-once/internal/dedupe"
	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/processor"
	"github.com/sqs-once/sqs-once/internal/testclock"
)

// countingDynamo wraps the real client, counting calls per operation and
// failing the lock protocol's operations on demand.
type countingDynamo struct {
	dedupe.DynamoAPI
	updates atomic.Int32
	// fail, when set, replaces the result of the named protocol operation:
	// "acquire", "renew", "complete" or "release".
	fail map[string]error
}

func (c *countingDynamo) total() int { return int(c.updates.Load()) }

func (c *countingDynamo) reset() { c.updates.Store(0) }

// updateOp names the protocol operation an UpdateItem is: only the acquire
// asks for the old item, only the completion removes the lock's expiry, and
// of the others only the release names the RELEASED status.
func updateOp(in *dynamodb.UpdateItemInput) string {
	switch {
	case in.ReturnValues == ddbtypes.ReturnValueAllOld:
		return "acquire"
	case strings.Contains(aws.ToString(in.UpdateExpression), "REMOVE"):
		return "complete"
	}
	for _, v := range in.ExpressionAttributeValues {
		if s, ok := v.(*ddbtypes.AttributeValueMemberS); ok && s.Value == "RELEASED" {
			return "release"
		}
	}
	return "renew"
}

func (c *countingDynamo) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.updates.Add(1)
	if err := c.fail[updateOp(in)]; err != nil {
		return nil, err
	}
	return c.DynamoAPI.UpdateItem(ctx, in, o...)
}

// business records the calls of a Business function and answers with the
// error registered for the message, if any.
type business struct {
	mu    sync.Mutex
	calls []string // message ids, in call order
	errs  map[string]error
	// hook, when set, runs inside each call before it returns.
	hook func(ctx context.Context, msg events.SQSMessage)
}

func (b *business) Handle(ctx context.Context, msg events.SQSMessage) error {
	if b.hook != nil {
		b.hook(ctx, msg)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, msg.MessageId)
	return b.errs[msg.MessageId]
}

func (b *business) Calls() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.calls...)
}

// logBuffer collects the handler's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

type bundle struct {
	logs     *logBuffer
	metrics  *logBuffer // the handlers' EMF lines
	cfg      processor.Config
	aws      aws.Config
	dynamo   *countingDynamo
	sqs      *sqs.Client
	clock    *testclock.Clock
	business *business
	handler  *processor.Handler
}

// setup builds a handler on a fresh table; configure adjusts the config
// before the handler is built.
func setup(t testing.TB, configure ...func(*processor.Config)) *bundle {
	t.Helper()
	awsCfg := mototest.Config(t)
	cfg, err := processor.LoadConfig(func(name string) (string, bool) {
		env := map[string]string{
			"IDEMPOTENCY_TABLE": mototest.NewIdempotencyTable(t, awsCfg),
			"KEY_PREFIX":        "test",
			"LOCK_TIMEOUT":      "60",
			"DEDUPE_WINDOW":     "3600",
		}
		v, ok := env[name]
		return v, ok
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range configure {
		f(&cfg)
	}
	b := &bundle{
		cfg: cfg,
		aws: awsCfg,
		// moto's conditional writes made atomic, as DynamoDB's are.
		dynamo:   &countingDynamo{DynamoAPI: motoserver.SerializeWrites(dynamodb.NewFromConfig(awsCfg))},
		sqs:      sqs.NewFromConfig(awsCfg),
		clock:    testclock.New(time.Now()),
		business: &business{errs: map[string]error{}},
		logs:     &logBuffer{},
		metrics:  &logBuffer{},
	}
	b.handler = b.newHandler(t)
	return b
}

// newHandler is another Lambda instance on the same table and clock.
func (b *bundle) newHandler(t testing.TB) *processor.Handler {
	return mustNew(t, b.cfg, processor.Deps{
		DynamoDB: b.dynamo,
		SQS:      b.sqs,
		Business: b.business.Handle,
		Now:      b.clock.Now,
		Rand:     func() float64 { return 0.5 },
		Sleep:    func(context.Context, time.Duration) error { return nil },
		Logger:   slog.New(slog.NewJSONHandler(b.logs, nil)),
		Metrics:  b.metrics,

		FunctionName: testFunction,
	})
}

// testFunction is the FunctionName dimension of the tests' metrics.
const testFunction = "orders-processor"

func mustNew(t testing.TB, cfg processor.Config, d processor.Deps) *processor.Handler {
	t.Helper()
	h, err := processor.New(cfg, d)
	if err != nil {
		t.Fatalf("processor.New: %v", err)
	}
	return h
}

func (b *bundle) handle(t *testing.T, records ...events.SQSMessage) []string {
	t.Helper()
	resp, err := b.handler.Handle(context.Background(), events.SQSEvent{Records: records})
	if err != nil {
		t.Fatalf("Handle returned an error, which would fail the whole batch: %v", err)
	}
	return failedIDs(resp)
}

func failedIDs(resp events.SQSEventResponse) []string {
	ids := []string{}
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

const standardARN = "arn:aws:sqs:us-east-1:123456789012:orders"

// record is a standard-queue record; opts adjust it.
func record(id, body string, opts ...func(*events.SQSMessage)) events.SQSMessage {
	m := events.SQSMessage{
		MessageId:      id,
		ReceiptHandle:  "rh-" + id,
		Body:           body,
		Attributes:     map[string]string{"ApproximateReceiveCount": "1"},
		EventSource:    "aws:sqs",
		EventSourceARN: standardARN,
		AWSRegion:      "us-east-1",
	}
	for _, o := range opts {
		o(&m)
	}
	return m
}

func withAttr(name, dataType, value string) func(*events.SQSMessage) {
	return func(m *events.SQSMessage) {
		if m.MessageAttributes == nil {
			m.MessageAttributes = map[string]events.SQSMessageAttribute{}
		}
		m.MessageAttributes[name] = events.SQSMessageAttribute{DataType: dataType, StringValue: aws.String(value)}
	}
}

func fifo(group string) func(*events.SQSMessage) {
	return func(m *events.SQSMessage) {
		m.EventSourceARN = "arn:aws:sqs:us-east-1:123456789012:orders.fifo"
		m.Attributes["MessageGroupId"] = group
	}
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}
