package mototest

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/internal/retrybudget"
)

var (
	serverURL string
	// shared is set when serverURL is a moto_server other test binaries
	// use too (motoserver.SharedEnv).
	shared bool
)

// Main runs the package's tests against a moto_server: the one that
// motoserver.SharedEnv names, shared by the test binaries of a whole `make
// test`, when it is set, otherwise one started for them and stopped
// afterwards. Call it from TestMain. A missing moto_server fails the run
// with the install instructions; it is never a skip.
//
// A package may share the server only if nothing it does reaches beyond
// its own uniquely named resources (Name): no resetting moto, no listing
// a whole account and expecting only its own, no change to the server's
// configuration other than the one every binary sets alike
// (LambdaWithoutDocker), no queued Invoke results (QueueInvokeResults).
// A package that needs any of these calls MainPrivate.
func Main(m *testing.M) {
	os.Exit(run(m, nil, false))
}

// MainWith is Main that calls setup with the server's configuration before
// the tests run, for resources the tests (or runnable examples, which cannot
// create their own) name. What setup does must be safe on a shared server
// (see Main).
func MainWith(m *testing.M, setup func(aws.Config) error) {
	os.Exit(run(m, setup, false))
}

// MainPrivate is MainWith on a moto_server started for this test binary
// alone, whether or not motoserver.SharedEnv is set: for a package whose
// tests change what the whole server answers (QueueInvokeResults).
func MainPrivate(m *testing.M, setup func(aws.Config) error) {
	os.Exit(run(m, setup, true))
}

// Run is Main without its exit: for a TestMain that starts servers of its
// own around the tests and stops them after (pgstore's PostgreSQL).
func Run(m *testing.M) int { return run(m, nil, false) }

func run(m *testing.M, setup func(aws.Config) error, private bool) int {
	srv, isShared, err := server(private)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: integration tests need moto_server:", err)
		return 1
	}
	defer srv.Stop()
	if err := srv.SetProcessEnv(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: set test environment:", err)
		return 1
	}
	serverURL, shared = srv.URL, isShared
	if setup != nil {
		cfg, err := config.LoadDefaultConfig(context.Background())
		if err == nil {
			err = setup(withSafeBody(cfg))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: set up test resources:", err)
			return 1
		}
	}
	return m.Run()
}

// server is the shared moto_server (motoserver.SharedEnv) unless private
// is set or there is none, otherwise one started for this binary.
func server(private bool) (srv *motoserver.Server, isShared bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if !private {
		url, ok, err := motoserver.Shared()
		if err != nil {
			return nil, false, err
		}
		if ok {
			// Looked up though not started here: exec.LookPath's stat of
			// moto_server is what go test's cache keys on, as it does for
			// a binary that starts its own (a new moto invalidates both).
			if _, err := motoserver.Find(); err != nil {
				return nil, false, err
			}
			srv, err := motoserver.Attach(ctx, url)
			return srv, true, err
		}
	}
	srv, err = motoserver.Start(ctx)
	return srv, false, err
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
	return withSafeBody(cfg)
}

// withSafeBody gives every client built from cfg retrybudget.SafeRequestBody:
// without it, a request whose writer goroutine lags behind moto's answer
// (common on a loaded machine) has its connection closed under the answer,
// and the SDK makes the call again: a message sent twice, a received one
// hidden for its visibility timeout, a create that conflicts with itself.
func withSafeBody(cfg aws.Config) aws.Config {
	cfg.APIOptions = append(cfg.APIOptions, retrybudget.SafeRequestBody)
	return cfg
}

var seq atomic.Int64

// Name returns a name unique within this test binary and run.
func Name(prefix string) string {
	return prefix + "-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36) + "-" + strconv.FormatInt(seq.Add(1), 10)
}

// NewIdempotencyTable creates a table with the schema dynamostore.Store
// expects (partition key id, string) and returns its name.
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
	// SDK retried it (what lost such answers under load is fixed by
	// withSafeBody; an answer can still be lost otherwise).
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

// LambdaWithoutDocker switches the server's Lambda to moto's Docker-free
// backend: an Invoke answers the next result queued with QueueInvokeResults,
// or echoes its payload when none is queued. Call it from MainWith's setup.
//
// The setting is the whole server's, and the functions CloudFormation
// creates (samstack's stacks) are not found in the Docker-free backend: a
// package that calls it runs on a server of its own (MainPrivate); on the
// shared one it fails.
func LambdaWithoutDocker(cfg aws.Config) error {
	if shared {
		return errors.New("mototest.LambdaWithoutDocker on the shared moto_server would hide other binaries' CloudFormation functions: call mototest.MainPrivate from TestMain")
	}
	return postMotoAPI(cfg, "/moto-api/config", map[string]any{"lambda": map[string]any{"use_docker": false}})
}

// QueueInvokeResults queues what the next Invokes in cfg's region answer,
// in order, whichever function they name. The queue is the region's: tests
// that queue results must not invoke concurrently in one region, and their
// package runs on a server of its own (MainPrivate), where no other test
// binary's Invoke can take a queued result.
func QueueInvokeResults(t testing.TB, cfg aws.Config, results ...string) {
	t.Helper()
	if shared {
		t.Fatal("mototest.QueueInvokeResults on the shared moto_server: another test binary's Invoke could take the result; call mototest.MainPrivate from TestMain")
	}
	if err := postMotoAPI(cfg, "/moto-api/static/lambda-simple/response", map[string]any{"results": results, "region": cfg.Region}); err != nil {
		t.Fatalf("queue Invoke results: %v", err)
	}
}

func postMotoAPI(cfg aws.Config, path string, body any) error {
	if cfg.BaseEndpoint == nil || *cfg.BaseEndpoint != serverURL {
		return fmt.Errorf("endpoint %v is not the local moto_server %s", cfg.BaseEndpoint, serverURL)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	resp, err := http.Post(serverURL+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s", path, resp.Status)
	}
	return nil
}

// NewFunction creates a Lambda function (with a role for it) that the
// Docker-free backend can invoke, and returns its name.
func NewFunction(t testing.TB, cfg aws.Config) string {
	t.Helper()
	ctx := context.Background()
	name := Name("fn")
	roleARN, err := createRole(ctx, cfg, name)
	if err != nil {
		t.Fatalf("create role %s: %v", name, err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	if f, err := zw.Create("bootstrap"); err == nil {
		_, _ = f.Write([]byte("#!/bin/sh\n"))
	}
	if err := zw.Close(); err != nil {
		t.Fatalf("zip: %v", err)
	}
	_, err = lambda.NewFromConfig(cfg).CreateFunction(ctx, &lambda.CreateFunctionInput{
		FunctionName:  aws.String(name),
		Role:          aws.String(roleARN),
		Runtime:       lambdatypes.RuntimeProvidedal2023,
		Handler:       aws.String("bootstrap"),
		Code:          &lambdatypes.FunctionCode{ZipFile: buf.Bytes()},
		Architectures: []lambdatypes.Architecture{lambdatypes.ArchitectureArm64},
	})
	var conflict *lambdatypes.ResourceConflictException
	// A conflict on this call's unique name is its own retried attempt,
	// which moto applied (seen in loaded full runs before withSafeBody,
	// whose doc says why).
	if err != nil && !errors.As(err, &conflict) {
		t.Fatalf("create function %s: %v", name, err)
	}
	return name
}

// QueueARN is the ARN of the queue at queueURL.
func QueueARN(t testing.TB, cfg aws.Config, queueURL string) string {
	t.Helper()
	out, err := sqs.NewFromConfig(cfg).GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(queueURL), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatalf("queue ARN of %s: %v", queueURL, err)
	}
	return out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
}

// NewTopicToQueue creates a topic (FIFO when fifo is set) that delivers its
// messages raw (body and attributes as published) to a new queue, and
// returns both.
func NewTopicToQueue(t testing.TB, cfg aws.Config, fifo bool) (topicARN, queueURL string) {
	t.Helper()
	ctx := context.Background()
	name := Name("topic")
	attrs := map[string]string{}
	if fifo {
		name += ".fifo"
		attrs["FifoTopic"] = "true"
	}
	client := sns.NewFromConfig(cfg)
	topic, err := client.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	queueURL = NewQueue(t, cfg, fifo, nil)
	if _, err := client.Subscribe(ctx, &sns.SubscribeInput{
		TopicArn: topic.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(QueueARN(t, cfg, queueURL)),
		Attributes: map[string]string{"RawMessageDelivery": "true"},
	}); err != nil {
		t.Fatalf("subscribe a queue to %s: %v", name, err)
	}
	return aws.ToString(topic.TopicArn), queueURL
}

// NewBusToQueue creates an event bus whose rule sends the events of source
// to a new queue, and returns both.
func NewBusToQueue(t testing.TB, cfg aws.Config, source string) (bus, queueURL string) {
	t.Helper()
	ctx := context.Background()
	queueURL = NewQueue(t, cfg, false, nil)
	bus, rule := Name("bus"), Name("rule")
	eb := eventbridge.NewFromConfig(cfg)
	pattern, _ := json.Marshal(map[string][]string{"source": {source}})
	if _, err := eb.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String(bus)}); err != nil {
		t.Fatalf("create bus %s: %v", bus, err)
	}
	if _, err := eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(rule), EventBusName: aws.String(bus), EventPattern: aws.String(string(pattern))}); err != nil {
		t.Fatalf("create rule %s: %v", rule, err)
	}
	if _, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(rule), EventBusName: aws.String(bus),
		Targets: []ebtypes.Target{{Id: aws.String("queue"), Arn: aws.String(QueueARN(t, cfg, queueURL))}}}); err != nil {
		t.Fatalf("target rule %s at a queue: %v", rule, err)
	}
	return bus, queueURL
}

// lambdaTrust is the trust policy of the roles NewFunction creates.
const lambdaTrust = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"lambda.amazonaws.com"},"Action":"sts:AssumeRole"}]}`

// createRole creates an IAM role Lambda may assume on moto_server and
// returns its ARN. A signed query request, not the IAM client: the IAM SDK
// module would be a requirement of the product module for this one call
// of its tests (moto_server takes the service from the signature's scope
// and accepts any credentials). One attempt, so no retried attempt can
// find the role already made.
func createRole(ctx context.Context, cfg aws.Config, name string) (string, error) {
	form := url.Values{
		"Action":                   {"CreateRole"},
		"Version":                  {"2010-05-08"},
		"RoleName":                 {name},
		"AssumeRolePolicyDocument": {lambdaTrust},
	}
	body := form.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, serverURL+"/", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(body))
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "iam", "us-east-1", time.Now()); err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("CreateRole: %s: %s", resp.Status, raw)
	}
	var out struct {
		ARN string `xml:"CreateRoleResult>Role>Arn"`
	}
	if err := xml.Unmarshal(raw, &out); err != nil || out.ARN == "" {
		return "", fmt.Errorf("CreateRole: no role ARN in %s (%v)", raw, err)
	}
	return out.ARN, nil
}

// TableDescriber is the DynamoDB call WaitTableActive makes.
type TableDescriber interface {
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// WaitTableActive returns once table name is ACTIVE on client's server,
// and fails t when ctx ends first. It asks every 10 ms: the SDK's waiter
// would first sleep 20 s, and the local servers (dynalite, a DynamoDB Local
// that delays its statuses) make a table ACTIVE within milliseconds.
func WaitTableActive(ctx context.Context, t testing.TB, client TableDescriber, name string) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err == nil && out.Table.TableStatus == ddbtypes.TableStatusActive {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("table %s did not become ACTIVE: %v (last: %v)", name, ctx.Err(), err)
		case <-tick.C:
		}
	}
}
