//go:build integration

package sqsonce

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/local/localesm"
	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/internal/testclock"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// dynamoBackend is DynamoDB on moto_server, with moto's queues.
var dynamoBackend = procBackend{name: "dynamodb", open: openDynamo}

func init() { procBackends = append(procBackends, dynamoBackend) }

func openDynamo(t testing.TB, b *procBundle) {
	t.Helper()
	b.aws = mototest.Config(t)
	b.table = mototest.NewIdempotencyTable(t, b.aws)
	client := dynamodb.NewFromConfig(b.aws)
	dynamo := &countingDynamo{AdminAPI: motoserver.Atomic(client)}
	b.store = dynamostore.New(dynamo, b.table)
	b.clock = testclock.New(time.Now())
	b.faults = dynamo
	s := sqs.NewFromConfig(b.aws)
	b.sqs = s
	b.queues = motoQueues{cfg: b.aws, sqs: s}
}

// countingDynamo wraps the table's client, counting calls per protocol
// operation and failing them on demand.
type countingDynamo struct {
	dynamostore.AdminAPI
	mu sync.Mutex
	// failures, when set, replace the result of the named protocol
	// operation: "acquire", "renew", "complete", "release", "read" or
	// "forget".
	failures map[string]error
	counts   map[string]int
}

var _ faultInjector = (*countingDynamo)(nil)

// updateOp names the protocol operation an UpdateItem is: only the acquire
// asks for the old item, only the completion removes the lock's expiry, and
// of the others only the release sets the RELEASED status (its condition
// names PROCESSING, as the renewal's does, so that is no tell).
func updateOp(in *dynamodb.UpdateItemInput) string {
	switch {
	case in.ReturnValues == ddbtypes.ReturnValueAllOld:
		return "acquire"
	case strings.Contains(aws.ToString(in.UpdateExpression), "REMOVE"):
		return "complete"
	}
	for _, v := range in.ExpressionAttributeValues {
		if s, ok := v.(*ddbtypes.AttributeValueMemberS); ok && s.Value == string(store.StatusReleased) {
			return "release"
		}
	}
	return "renew"
}

func (c *countingDynamo) fail(op string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failures == nil {
		c.failures = map[string]error{}
	}
	c.failures[op] = err
}

func (c *countingDynamo) calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range c.counts {
		n += k
	}
	return n
}

func (c *countingDynamo) opCalls(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[op]
}

func (c *countingDynamo) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts = nil
}

func (c *countingDynamo) call(op string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.counts[op]++
	return c.failures[op]
}

func (c *countingDynamo) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if err := c.call(updateOp(in)); err != nil {
		return nil, err
	}
	return c.AdminAPI.UpdateItem(ctx, in, o...)
}

func (c *countingDynamo) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if err := c.call("read"); err != nil {
		return nil, err
	}
	return c.AdminAPI.GetItem(ctx, in, o...)
}

func (c *countingDynamo) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if err := c.call("forget"); err != nil {
		return nil, err
	}
	return c.AdminAPI.DeleteItem(ctx, in, o...)
}

func (c *countingDynamo) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	if err := c.call("scan"); err != nil {
		return nil, err
	}
	return c.AdminAPI.Scan(ctx, in, o...)
}

// faultyTable routes b's table calls through a fault proxy, for the test
// to script, and builds b's processor again on it. The SDK's retries wait 5
// ms at most.
func faultyTable(t *testing.T, b *procBundle) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start(mototest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	client := dynamodb.NewFromConfig(b.aws, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(p.URL)
		o.Retryer = awsretry.AddWithMaxBackoffDelay(awsretry.NewStandard(), 5*time.Millisecond)
	})
	// Before any call: nothing reads the field concurrently yet.
	b.faults.(*countingDynamo).AdminAPI = motoserver.Atomic(client)
	b.processor = b.newProcessor(t)
	return p
}

// motoQueues are moto_server's queues.
type motoQueues struct {
	cfg aws.Config
	sqs *sqs.Client
}

func (m motoQueues) newQueue(t testing.TB, fifo bool, attrs map[string]string) string {
	return mototest.NewQueue(t, m.cfg, fifo, attrs)
}

func (m motoQueues) queueARN(t testing.TB, url string) string {
	return mototest.QueueARN(t, m.cfg, url)
}

func (m motoQueues) missingQueue(t testing.TB) string {
	return mototest.URL(t) + "/123456789012/does-not-exist"
}

func (m motoQueues) received(t testing.TB, url string, want int) []sqstypes.Message {
	return mototest.Receive(t, m.cfg, url, want, 5*time.Second)
}

func (m motoQueues) event(t testing.TB, url string, bodies ...string) events.SQSEvent {
	t.Helper()
	for _, body := range bodies {
		if _, err := m.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(body),
			MessageAttributes: map[string]sqstypes.MessageAttributeValue{"trace": sqsmsg.String("t-1")}}); err != nil {
			t.Fatal(err)
		}
	}
	msgs := mototest.Receive(t, m.cfg, url, len(bodies), 5*time.Second)
	ev, err := localesm.NewEvent(msgs, m.queueARN(t, url), "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

var _ inFlightCounter = motoQueues{}

// inFlight is ApproximateNumberOfMessagesNotVisible.
func (m motoQueues) inFlight(t testing.TB, url string) string {
	t.Helper()
	out, err := m.sqs.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)]
}
