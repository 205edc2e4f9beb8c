//go:build integration

package dynamostore_test

import (
	"context"
	"encoding/json"
	"errors"
	"hash/crc32"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/local/dynalite"
	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// checkTable runs Check on table through a *dynamodb.Client from cfg, as a
// deploy step would.
func checkTable(t *testing.T, cfg aws.Config, table string) error {
	t.Helper()
	return dynamostore.New(dynamodb.NewFromConfig(cfg), table).Check(context.Background())
}

// createTable creates a table with the given partition key (and sort key,
// when set) on cfg's endpoint and returns its name.
func createTable(t *testing.T, cfg aws.Config, partition string, typ ddbtypes.ScalarAttributeType, sortKey string) string {
	t.Helper()
	name := mototest.Name("check")
	in := &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String(partition), AttributeType: typ}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String(partition), KeyType: ddbtypes.KeyTypeHash}},
	}
	if sortKey != "" {
		in.AttributeDefinitions = append(in.AttributeDefinitions, ddbtypes.AttributeDefinition{AttributeName: aws.String(sortKey), AttributeType: ddbtypes.ScalarAttributeTypeS})
		in.KeySchema = append(in.KeySchema, ddbtypes.KeySchemaElement{AttributeName: aws.String(sortKey), KeyType: ddbtypes.KeyTypeRange})
	}
	_, err := dynamodb.NewFromConfig(cfg).CreateTable(context.Background(), in)
	// The name is this test's alone: a table that exists is this call's
	// own first attempt, applied and retried by the SDK.
	if err != nil && !errors.As(err, new(*ddbtypes.ResourceInUseException)) {
		t.Fatalf("create table %s: %v", name, err)
	}
	return name
}

func enableTTL(t *testing.T, cfg aws.Config, table, attr string) {
	t.Helper()
	_, err := dynamodb.NewFromConfig(cfg).UpdateTimeToLive(context.Background(), &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String(attr), Enabled: aws.Bool(true)},
	})
	if err != nil {
		t.Fatalf("enable TTL on %s.%s: %v", table, attr, err)
	}
}

// wantCheckError fails t unless err matches exactly the sentinels named
// (ErrMisconfigured, ErrNoTTL) and its text holds each of want.
func wantCheckError(t *testing.T, err error, misconfigured, noTTL bool, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("Check: nil, want an error")
	}
	if errors.Is(err, store.ErrMisconfigured) != misconfigured || errors.Is(err, dynamostore.ErrNoTTL) != noTTL || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Check: %v; matches ErrMisconfigured %v, ErrNoTTL %v, ErrUnavailable %v; want %v, %v, false",
			err, errors.Is(err, store.ErrMisconfigured), errors.Is(err, dynamostore.ErrNoTTL), errors.Is(err, store.ErrUnavailable), misconfigured, noTTL)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Check: %q\ndoes not say %q", err, w)
		}
	}
}

// TestCheckOnMoto: Check against moto_server's DynamoDB, through the SDK's
// real client.
func TestCheckOnMoto(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	where := func(table string) string { return "sqsonce: table " + table + " in region " + cfg.Region + ": " }

	t.Run("right table", func(t *testing.T) {
		t.Parallel()
		table := mototest.NewIdempotencyTable(t, cfg)
		enableTTL(t, cfg, table, dynamostore.AttrExpiresAt)
		if err := checkTable(t, cfg, table); err != nil {
			t.Errorf("Check: %v", err)
		}
	})
	t.Run("no TTL", func(t *testing.T) {
		t.Parallel()
		table := mototest.NewIdempotencyTable(t, cfg)
		wantCheckError(t, checkTable(t, cfg, table), false, true,
			where(table)+"warning: TTL is DISABLED",
			"aws dynamodb update-time-to-live --table-name "+table+" --region "+cfg.Region+" --time-to-live-specification Enabled=true,AttributeName=expiresAt")
	})
	t.Run("TTL on another attribute", func(t *testing.T) {
		t.Parallel()
		table := mototest.NewIdempotencyTable(t, cfg)
		enableTTL(t, cfg, table, "ttl")
		wantCheckError(t, checkTable(t, cfg, table), false, true, where(table)+`warning: TTL is on "ttl", not "expiresAt"`)
	})
	t.Run("wrong partition key", func(t *testing.T) {
		t.Parallel()
		table := createTable(t, cfg, "pk", ddbtypes.ScalarAttributeTypeS, "")
		enableTTL(t, cfg, table, dynamostore.AttrExpiresAt)
		wantCheckError(t, checkTable(t, cfg, table), true, false, where(table)+`the partition key is "pk", not "id"`)
	})
	t.Run("numeric partition key", func(t *testing.T) {
		t.Parallel()
		table := createTable(t, cfg, "id", ddbtypes.ScalarAttributeTypeN, "")
		enableTTL(t, cfg, table, dynamostore.AttrExpiresAt)
		wantCheckError(t, checkTable(t, cfg, table), true, false, where(table)+`the partition key "id" is of type N (Number)`)
	})
	t.Run("sort key and no TTL", func(t *testing.T) {
		t.Parallel()
		table := createTable(t, cfg, "id", ddbtypes.ScalarAttributeTypeS, "sk")
		wantCheckError(t, checkTable(t, cfg, table), true, true,
			"sqsonce: table "+table+" in region "+cfg.Region+" has 2 problems: (1) the table has a sort key, \"sk\"", "(2) warning: TTL is DISABLED")
	})
	t.Run("missing table", func(t *testing.T) {
		t.Parallel()
		table := mototest.Name("missing")
		err := checkTable(t, cfg, table)
		wantCheckError(t, err, true, false, where(table)+"no such table")
		if !errors.As(err, new(*ddbtypes.ResourceNotFoundException)) {
			t.Errorf("Check: %v does not unwrap to the SDK's ResourceNotFoundException", err)
		}
	})
	t.Run("access denied", func(t *testing.T) {
		t.Parallel()
		// moto allows everything; the proxy answers DescribeTable as
		// DynamoDB answers a role without dynamodb:DescribeTable.
		table := mototest.NewIdempotencyTable(t, cfg)
		proxy, err := faultproxy.Start(mototest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		defer proxy.Close()
		msg := "User: arn:aws:sts::123456789012:assumed-role/ci/deploy is not authorized to perform: dynamodb:DescribeTable on resource: arn:aws:dynamodb:us-east-1:123456789012:table/" + table
		body, _ := json.Marshal(map[string]string{"__type": "com.amazon.coral.service#AccessDeniedException", "message": msg})
		proxy.Script("DescribeTable", faultproxy.AnswerBefore(http.StatusBadRequest, http.Header{
			"Content-Type": {"application/x-amz-json-1.0"},
			// DynamoDB's checksum of the body, which the SDK verifies.
			"X-Amz-Crc32": {strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10)},
		}, body))
		proxied := cfg.Copy()
		proxied.BaseEndpoint = aws.String(proxy.URL)
		wantCheckError(t, checkTable(t, proxied, table), true, false,
			where(table)+"access denied to dynamodb:DescribeTable ("+msg+")", "need dynamodb:DescribeTable and dynamodb:DescribeTimeToLive")
	})
}

// TestCheckOnDynalite: dynalite has no UpdateTimeToLive, and answers
// DescribeTimeToLive with DISABLED, so a table of the right schema has the
// TTL warning alone: a test on it accepts ErrNoTTL without
// ErrMisconfigured, as ExampleProcessor_Check does.
func TestCheckOnDynalite(t *testing.T) {
	t.Parallel()
	cfg := dynalite.Config(t)
	table := dynalite.NewIdempotencyTable(t, cfg)
	wantCheckError(t, checkTable(t, cfg, table), false, true, "sqsonce: table "+table+" in region "+dynalite.Region+": warning: TTL is DISABLED")

	missing := mototest.Name("missing")
	wantCheckError(t, checkTable(t, cfg, missing), true, false, "sqsonce: table "+missing+" in region "+dynalite.Region+": no such table")
}

// TestCheckDocsTableCommands runs docs/table.md's AWS CLI commands as the
// page gives them (with the table's name made unique, and the CLI pointed at
// moto_server), then checks the table they made and runs the processor on
// it.
func TestCheckDocsTableCommands(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("aws"); err != nil {
		t.Fatal("the AWS CLI (aws) is not on PATH: install it with `pip install awscli` (v1) or AWS's installer (v2)")
	}
	cfg := mototest.Config(t)
	block := tableDocBlock(t, "sh", "aws dynamodb create-table")
	assign := regexp.MustCompile(`(?m)^TABLE=(\S+)$`)
	m := assign.FindAllStringSubmatch(block, -1)
	if len(m) != 1 {
		t.Fatalf("%s: the commands set TABLE=<name> %d times, want once:\n%s", tableDoc, len(m), block)
	}
	table := mototest.Name(m[0][1])
	script := assign.ReplaceAllLiteralString(block, "TABLE="+table)

	// Every aws command of the block goes to moto_server: a function
	// shadows the CLI and adds the endpoint, and -e stops at the first that
	// fails.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", "set -eu\naws() { command aws --endpoint-url \"$SQSONCE_TEST_ENDPOINT\" \"$@\"; }\n"+script)
	cmd.Env = append(os.Environ(),
		"SQSONCE_TEST_ENDPOINT="+mototest.URL(t),
		"AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing", "AWS_SESSION_TOKEN=testing",
		"AWS_DEFAULT_REGION="+cfg.Region, "AWS_REGION="+cfg.Region,
		"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE="+os.DevNull, "AWS_SHARED_CREDENTIALS_FILE="+os.DevNull,
		"AWS_PAGER=",
	)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the commands of %s: %v\n%s\n%s", tableDoc, err, script, out)
	}

	if err := checkTable(t, cfg, table); err != nil {
		t.Fatalf("Check on the table the commands made: %v", err)
	}
	p, err := sqsonce.NewConsumer(sqsonce.ConsumerConfig{Config: sqsonce.Config{Store: dynamostore.New(dynamodb.NewFromConfig(cfg), table), KeyPrefix: "docs", Logger: slog.New(slog.DiscardHandler)}, AWS: cfg}, nil)
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	fn := func(context.Context) error { runs++; return nil }
	if err := p.Do(context.Background(), "order-1", fn); err != nil {
		t.Fatalf("Do on the table: %v", err)
	}
	if err := p.Do(context.Background(), "order-1", fn); !errors.Is(err, sqsonce.ErrDuplicate) || runs != 1 {
		t.Fatalf("Do again: %v after %d runs, want ErrDuplicate after 1", err, runs)
	}
}
