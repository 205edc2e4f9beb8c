//go:build integration

package ops_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/samstack"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
)

func TestMain(m *testing.M) { mototest.Main(m) }

// The stack every test runs against: template.yaml, translated by the SAM
// translator and deployed to the package's moto_server as the template
// tests deploy it (samstack.Deploy), with default parameters.
var deployed = sync.OnceValues(func() (*samstack.Stack, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, err
	}
	return samstack.Deploy(ctx, cfg, mototest.Name("ops"), filepath.Join("..", "..", "..", "..", "template.yaml"), nil)
})

func stack(t testing.TB) *samstack.Stack {
	t.Helper()
	mototest.Config(t) // refuses to run against anything but the local server
	st, err := deployed()
	if err != nil {
		t.Fatalf("deploy template.yaml: %v", err)
	}
	return st
}

func output(t testing.TB, key string) string {
	t.Helper()
	v, err := stack(t).Output(key)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// queueMu serialises the tests that use the stack's queues: each starts
// from empty queues and counts what they hold.
var queueMu sync.Mutex

// emptyQueues locks the stack's queues for the test and purges them.
func emptyQueues(t *testing.T) {
	t.Helper()
	queueMu.Lock()
	t.Cleanup(queueMu.Unlock)
	client := sqs.NewFromConfig(mototest.Config(t))
	for _, k := range []string{"MainQueueUrl", "DeadLetterQueueUrl", "OperatorQueueUrl"} {
		if _, err := client.PurgeQueue(context.Background(), &sqs.PurgeQueueInput{QueueUrl: aws.String(output(t, k))}); err != nil {
			t.Fatalf("purge %s: %v", k, err)
		}
	}
}

// queueTest takes the stack's queues for the test, empty, and returns the
// stack, the configuration and the main and operator queues' URLs.
func queueTest(t *testing.T) (st *samstack.Stack, cfg aws.Config, main, operator string) {
	t.Helper()
	emptyQueues(t)
	return stack(t), mototest.Config(t), output(t, "MainQueueUrl"), output(t, "OperatorQueueUrl")
}

func dynamoClient(cfg aws.Config) *dynamodb.Client { return dynamodb.NewFromConfig(cfg) }
