package mototest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/motoserver"
)

var serverURL string

// Main runs the package's tests against a moto_server started for them, and
// stops it afterwards. Call it from TestMain. A missing moto_server fails the
// run with the install instructions; it is never a skip.
func Main(m *testing.M) {
	os.Exit(run(m, nil))
}

// MainWith is Main that calls setup with the server's configuration before
// the tests run, for resources the tests (or runnable examples, which cannot
// create their own) name.
func MainWith(m *testing.M, setup func(aws.Config) error) {
	os.Exit(run(m, setup))
}

func run(m *testing.M, setup func(aws.Config) error) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	srv, err := motoserver.Start(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: integration tests need moto_server:", err)
		return 1
	}
	defer srv.Stop()
	if err := srv.SetProcessEnv(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: set test environment:", err)
		return 1
	}
	serverURL = srv.URL
	if setup != nil {
		cfg, err := config.LoadDefaultConfig(context.Background())
		if err == nil {
			err = setup(cfg)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: set up test resources:", err)
			return 1
		}
	}
	return m.Run()
}

// URL is the endpoint of the package's moto_server.
func URL(t testing.TB) string {
	t.Helper()
	if serverURL == "" {
		t.Fatal("mototest: no moto_server; call mototest.Main from TestMain")
	}
	return serverURL
}

// Config loads the SDK configuration exactly as a Lambda would, from the
// environment that Main pointed at moto_server.
func Config(t testing.TB) aws.Config {
	t.Helper()
	URL(t)
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		t.Fatalf("load AWS config: %v", err)
	}
	if cfg.BaseEndpoint == nil || *cfg.BaseEndpoint != serverURL {
		t.Fatalf("AWS config endpoint %v is not the local moto_server %s: refusing to run against anything else", cfg.BaseEndpoint, serverURL)
	}
	return cfg
}

var seq atomic.Int64

// Name returns a name unique within this test binary and run.
func Name(prefix string) string {
	return prefix + "-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36) + "-" + strconv.FormatInt(seq.Add(1), 10)
}

// NewIdempotencyTable creates a table with the schema the dedupe store expects
// (partition key id, string) and returns its name.
func NewIdempotencyTable(t testing.TB, cfg aws.Config) string {
	t.Helper()
	name := Name("idem")
	_, err := dynamodb.NewFromConfig(cfg).CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: ddbtypes.KeyTypeHash}},
	})
	// The name is this test's alone, so a table that exists already is this
	// call's own: moto applied a first attempt whose answer was lost, and the
	// SDK retried it.
	var inUse *ddbtypes.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		t.Fatalf("create table %s: %v", name, err)
	}
	return name
}

// NewQueue creates a queue (a FIFO queue when fifo is set) with the given
// attributes and returns its URL.
func NewQueue(t testing.TB, cfg aws.Config, fifo bool, attrs map[string]string) string {
	t.Helper()
	name := Name("q")
	all := map[string]string{}
	for k, v := range attrs {
		all[k] = v
	}
	if fifo {
		name += ".fifo"
		all[string(sqstypes.QueueAttributeNameFifoQueue)] = "true"
	}
	out, err := sqs.NewFromConfig(cfg).CreateQueue(context.Background(), &sqs.CreateQueueInput{
		QueueName:  aws.String(name),
		Attributes: all,
	})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	return aws.ToString(out.QueueUrl)
}

// Receive long-polls queueURL until it has collected want messages or wait
// has passed, returning what arrived with all attributes.
func Receive(t testing.TB, cfg aws.Config, queueURL string, want int, wait time.Duration) []sqstypes.Message {
	t.Helper()
	client := sqs.NewFromConfig(cfg)
	deadline := time.Now().Add(wait)
	var got []sqstypes.Message
	for len(got) < want && time.Now().Before(deadline) {
		out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(queueURL),
			MaxNumberOfMessages:         10,
			WaitTimeSeconds:             1,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil {
			t.Fatalf("receive from %s: %v", queueURL, err)
		}
		got = append(got, out.Messages...)
	}
	return got
}
