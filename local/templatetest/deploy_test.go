//go:build integration

package templatetest

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/samstack"
	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/replay"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// knownGaps are the properties moto_server cannot show; each is checked on
// the translated template by the test named.
var knownGaps = map[string]string{
	"OperatorQueueNotEmptyAlarm":                        "TestAlarms",
	"DeadLetterQueueNotEmptyAlarm":                      "TestAlarms",
	"DeadLetterAgeAlarm":                                "TestAlarms",
	"ProcessorErrorsAlarm":                              "TestAlarms",
	"DlqReplayerErrorsAlarm":                            "TestAlarms",
	"ProcessorUnrecordedCompletionAlarm":                "TestAlarms",
	"ProcessorLockLostAlarm":                            "TestAlarms",
	"ProcessorEmitPendingAlarm":                         "TestAlarms",
	"AlarmEmailSubscription":                            "TestAlarms",
	"IdempotencyTable.SSESpecification":                 "TestIdempotencyTable",
	"DeadLetterQueue.RedriveAllowPolicy":                "TestQueues",
	"ProcessorFunction.Architectures":                   "TestFunctionRuntimeBuildAndLogging",
	"ProcessorFunction.LoggingConfig":                   "TestFunctionRuntimeBuildAndLogging",
	"ProcessorFunction.RecursiveLoop":                   "TestFunctionRuntimeBuildAndLogging",
	"DlqReplayerFunction.Architectures":                 "TestFunctionRuntimeBuildAndLogging",
	"DlqReplayerFunction.LoggingConfig":                 "TestFunctionRuntimeBuildAndLogging",
	"DlqReplayerFunction.RecursiveLoop":                 "TestFunctionRuntimeBuildAndLogging",
	"ProcessorFunction.TracingConfig":                   "TestInstallEventSourceOptions",
	"DlqReplayerFunction.TracingConfig":                 "TestInstallEventSourceOptions",
	"IdempotencyTable.TimeToLiveSpecification":          "TestIdempotencyTable; applied by samstack",
	"IdempotencyTable.PointInTimeRecoverySpecification": "TestIdempotencyTable; applied by samstack",
}

// deploy deploys template.yaml with params on the package's moto_server,
// as a stack of the test's own: for a test that changes what it deployed
// (sends messages, drives the functions) or whose parameters no other test
// uses.
func deploy(t *testing.T, params map[string]string) *samstack.Stack {
	t.Helper()
	st, err := samstack.Deploy(testContext(t, 2*time.Minute), mototest.Config(t), mototest.Name("sqs-once"), templatePath(t), params)
	if err != nil {
		t.Fatal(err)
	}
	checkAdaptations(t, st)
	return st
}

// sharedStacks are the stacks deployShared deployed in this test binary,
// by their parameters' values: a func() (*samstack.Stack, error) from
// sync.OnceValues each.
var sharedStacks sync.Map

// deployShared is deploy for a test that only reads the stack: tests that
// deploy the same parameter values (the defaults: TestDeployedWiring,
// TestDeployedInstalls and TestDeployedTargets each check them) share one
// stack, deployed once per test binary, instead of a translation and a
// CloudFormation stack on moto_server each.
func deployShared(t *testing.T, params map[string]string) *samstack.Stack {
	t.Helper()
	// The values, defaults filled in: nil, {} and {"Target": ""} are one
	// stack.
	values, err := translatedTemplate(t).ParameterValues(params)
	if err != nil {
		t.Fatal(err)
	}
	key, err := json.Marshal(values) // map keys sorted: a stable key
	if err != nil {
		t.Fatal(err)
	}
	// Whichever test calls first deploys, in its goroutine: the function
	// uses no t.
	cfg, name, path := mototest.Config(t), mototest.Name("sqs-once"), templatePath(t)
	once, _ := sharedStacks.LoadOrStore(string(key), sync.OnceValues(func() (*samstack.Stack, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		return samstack.Deploy(ctx, cfg, name, path, params)
	}))
	st, err := once.(func() (*samstack.Stack, error))()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stack %s, shared by the tests that deploy these parameters", st.Name)
	checkAdaptations(t, st)
	return st
}

// checkAdaptations logs what samstack changed for moto_server and fails on
// a gap no test covers.
func checkAdaptations(t *testing.T, st *samstack.Stack) {
	t.Helper()
	for _, a := range st.Adaptations {
		t.Log(a)
		key := a.LogicalID
		if a.Property != "" && a.Kind != samstack.Disabled && a.Kind != samstack.Rewritten {
			key += "." + a.Property
		}
		if (a.Kind == samstack.Missing || a.Kind == samstack.Applied) && knownGaps[key] == "" {
			t.Errorf("new gap between moto_server and CloudFormation, not covered by any test: %s", a)
		}
	}
}

func TestDeployedWiring(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		params map[string]string
	}{
		{name: "defaults"},
		{name: "every parameter set", params: map[string]string{
			"MaxReceiveCount": "2", "MessageRetentionPeriod": "86400", "ProcessorTimeout": "60",
			"ProcessorBatchSize": "100", "ProcessorBatchingWindow": "5", "ProcessorMaximumConcurrency": "7",
			"RecordConcurrency": "4", "IdempotencyKey": "body:/orderId", "KeyPrefix": "orders", "DedupeWindow": "3600",
			"LockTimeout": "45", "InProgress": "drop", "FailureBackoffBase": "1.5", "PayloadValidation": "on", "LocalCache": "500", "HashKeys": "on",
			"MaxAttempts": "5", "BackoffBase": "0.5", "BackoffRate": "3", "MaxDelay": "60", "Jitter": "equal",
			"ReplayerBatchSize": "5", "ReplayerBatchingWindow": "1", "ReplayerMaximumConcurrency": "3",
			"PointInTimeRecovery": "false", "LogLevel": "DEBUG", "LogRetentionInDays": "7",
			"AlarmEmail": "ops@example.com", "DlqAgeAlarmThreshold": "120",
			"Target": "sqs:https://sqs.us-east-1.amazonaws.com/123456789012/orders", "TargetKmsKeyArn": kmsKey,
			"TargetEventSource": "com.example.orders", "TargetDetailType": "Order placed",
			"MaxMessageAge": "7200", "Tracing": "Active", "ProcessorMappingMetrics": "on", "Dashboard": "off",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := deployShared(t, tt.params)
			checkWiring(t, st)
		})
	}
}

func checkWiring(t *testing.T, st *samstack.Stack) {
	cfg := mototest.Config(t)
	ctx := testContext(t, time.Minute)
	p := st.Parameters
	if st.Status != "CREATE_COMPLETE" {
		t.Fatalf("stack status %s", st.Status)
	}
	out := func(key string) string {
		v, err := st.Output(key)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	sqsc := sqs.NewFromConfig(cfg)
	attrs := func(url string) map[string]string {
		o, err := sqsc.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
		})
		if err != nil {
			t.Fatal(err)
		}
		return o.Attributes
	}
	mainQ, dlq, opQ := attrs(out("MainQueueUrl")), attrs(out("DeadLetterQueueUrl")), attrs(out("OperatorQueueUrl"))
	proc, rep := st.Functions[processorID], st.Functions[replayerID]
	seconds := func(s string) time.Duration {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("%q is not whole seconds", s)
		}
		return time.Duration(n) * time.Second
	}

	t.Run("redrive", func(t *testing.T) {
		var rp struct {
			Target string `json:"deadLetterTargetArn"`
			Max    int    `json:"maxReceiveCount"`
		}
		if err := json.Unmarshal([]byte(mainQ["RedrivePolicy"]), &rp); err != nil {
			t.Fatalf("RedrivePolicy %q: %v", mainQ["RedrivePolicy"], err)
		}
		if rp.Target != dlq["QueueArn"] || strconv.Itoa(rp.Max) != p["MaxReceiveCount"] {
			t.Errorf("RedrivePolicy = %+v, want the DLQ %s after %s receives", rp, dlq["QueueArn"], p["MaxReceiveCount"])
		}
		if dlq["QueueArn"] != out("DeadLetterQueueArn") || mainQ["QueueArn"] != out("MainQueueArn") || opQ["QueueArn"] != out("OperatorQueueArn") {
			t.Error("queue ARN outputs do not match the queues")
		}
		if mainQ["MessageRetentionPeriod"] != p["MessageRetentionPeriod"] || seconds(dlq["MessageRetentionPeriod"]) <= seconds(mainQ["MessageRetentionPeriod"]) {
			t.Errorf("retention: main %s s (want %s), DLQ %s s must be longer", mainQ["MessageRetentionPeriod"], p["MessageRetentionPeriod"], dlq["MessageRetentionPeriod"])
		}
		for name, a := range map[string]map[string]string{"main": mainQ, "dlq": dlq, "operator": opQ} {
			if a["SqsManagedSseEnabled"] != "true" {
				t.Errorf("%s queue: SqsManagedSseEnabled = %q", name, a["SqsManagedSseEnabled"])
			}
		}
	})

	t.Run("visibility timeout at least six function timeouts plus the batching window", func(t *testing.T) {
		if proc.Timeout != seconds(p["ProcessorTimeout"]) {
			t.Errorf("processor timeout %v, want %s s", proc.Timeout, p["ProcessorTimeout"])
		}
		for _, q := range []struct {
			name  string
			attrs map[string]string
			fn    samstack.Function
		}{{"main queue", mainQ, proc}, {"DLQ", dlq, rep}} {
			es, ok := q.fn.EventSource(q.attrs["QueueArn"])
			if !ok {
				t.Errorf("%s does not consume the %s", q.fn.LogicalID, q.name)
				continue
			}
			if v := seconds(q.attrs["VisibilityTimeout"]); q.fn.Timeout == 0 || v < 6*q.fn.Timeout+es.BatchingWindow {
				t.Errorf("%s visibility %v < 6 × %s timeout %v + batching window %v", q.name, v, q.fn.LogicalID, q.fn.Timeout, es.BatchingWindow)
			}
		}
	})

	t.Run("idempotency table", func(t *testing.T) {
		ddb := dynamodb.NewFromConfig(cfg)
		name := out("IdempotencyTableName")
		d, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		if ks := d.Table.KeySchema; len(ks) != 1 || aws.ToString(ks[0].AttributeName) != "id" || ks[0].KeyType != ddbtypes.KeyTypeHash {
			t.Errorf("key schema %+v, want id HASH", ks)
		}
		if d.Table.BillingModeSummary == nil || d.Table.BillingModeSummary.BillingMode != ddbtypes.BillingModePayPerRequest {
			t.Errorf("billing %+v, want on demand", d.Table.BillingModeSummary)
		}
	})

	// moto_server's CloudFormation ignores TimeToLiveSpecification and
	// PointInTimeRecoverySpecification; samstack reads them from the
	// translated template and sets them with the DynamoDB API (an "applied"
	// adaptation). So this checks samstack's resolution of the template's
	// values (the TTL attribute, the parameter), not CloudFormation;
	// TestIdempotencyTable checks the properties themselves.
	t.Run("TTL and PITR as samstack applied them", func(t *testing.T) {
		ddb := dynamodb.NewFromConfig(cfg)
		name := out("IdempotencyTableName")
		applied := map[string]bool{}
		for _, a := range st.Adaptations {
			if a.Kind == samstack.Applied && a.LogicalID == "IdempotencyTable" {
				applied[a.Property] = true
			}
		}
		if !applied["TimeToLiveSpecification"] {
			t.Error("samstack did not apply the TTL: either moto_server now supports it (drop this adaptation) or it was lost")
		}
		ttl, err := ddb.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		if ttl.TimeToLiveDescription.TimeToLiveStatus != ddbtypes.TimeToLiveStatusEnabled || aws.ToString(ttl.TimeToLiveDescription.AttributeName) != "expiresAt" {
			t.Errorf("TTL %+v, want enabled on expiresAt", ttl.TimeToLiveDescription)
		}
		cb, err := ddb.DescribeContinuousBackups(ctx, &dynamodb.DescribeContinuousBackupsInput{TableName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		pitr := cb.ContinuousBackupsDescription.PointInTimeRecoveryDescription.PointInTimeRecoveryStatus == ddbtypes.PointInTimeRecoveryStatusEnabled
		if strconv.FormatBool(pitr) != p["PointInTimeRecovery"] {
			t.Errorf("point-in-time recovery %v, want %s", pitr, p["PointInTimeRecovery"])
		}
	})

	t.Run("event source mappings", func(t *testing.T) {
		for _, tt := range []struct {
			fn     samstack.Function
			queue  string
			prefix string
		}{{proc, mainQ["QueueArn"], "Processor"}, {rep, dlq["QueueArn"], "Replayer"}} {
			if len(tt.fn.EventSources) != 1 {
				t.Errorf("%s has %d event sources, want 1", tt.fn.LogicalID, len(tt.fn.EventSources))
				continue
			}
			es, ok := tt.fn.EventSource(tt.queue)
			if !ok {
				t.Errorf("%s does not consume %s: %+v", tt.fn.LogicalID, tt.queue, tt.fn.EventSources)
				continue
			}
			if !slices.Equal(es.FunctionResponseTypes, []string{"ReportBatchItemFailures"}) ||
				strconv.Itoa(es.BatchSize) != p[tt.prefix+"BatchSize"] ||
				es.BatchingWindow != seconds(p[tt.prefix+"BatchingWindow"]) ||
				strconv.Itoa(es.MaximumConcurrency) != p[tt.prefix+"MaximumConcurrency"] {
				t.Errorf("%s mapping %+v does not match parameters %s* %v", tt.fn.LogicalID, es, tt.prefix, p)
			}
		}
	})

	t.Run("environment", func(t *testing.T) {
		keyPrefix := p["KeyPrefix"]
		if keyPrefix == "" {
			keyPrefix = st.Name + "-processor"
		}
		blankIfZero := func(s string) string {
			if s == "0" {
				return ""
			}
			return s
		}
		wantProc := map[string]string{
			"QUEUE_URL":              out("MainQueueUrl"),
			"STORE":                  "dynamodb",
			"IDEMPOTENCY_TABLE":      out("IdempotencyTableName"),
			"KEY_PREFIX":             keyPrefix,
			"IDEMPOTENCY_KEY":        p["IdempotencyKey"],
			"LOCK_TIMEOUT":           blankIfZero(p["LockTimeout"]),
			"DEDUPE_WINDOW":          p["DedupeWindow"],
			"IN_PROGRESS":            p["InProgress"],
			"MAX_CONCURRENCY":        p["RecordConcurrency"],
			"FAILURE_BACKOFF_BASE":   blankIfZero(p["FailureBackoffBase"]),
			"OPERATOR_QUEUE_URL":     out("OperatorQueueUrl"),
			"PAYLOAD_VALIDATION":     p["PayloadValidation"],
			"LOCAL_CACHE":            p["LocalCache"],
			"HASH_KEYS":              p["HashKeys"],
			"TARGET":                 p["Target"],
			"TARGET_EVENT_SOURCE":    p["TargetEventSource"],
			"TARGET_DETAIL_TYPE":     p["TargetDetailType"],
			"TARGET_INVOCATION_TYPE": p["TargetInvocationType"],
		}
		if !maps.Equal(proc.Env, wantProc) {
			t.Errorf("processor env\n got %v\nwant %v", proc.Env, wantProc)
		}
		maxAge := p["MaxMessageAge"]
		if maxAge == "0" {
			maxAge = p["MessageRetentionPeriod"]
		}
		wantRep := map[string]string{
			"MAX_MESSAGE_AGE":    maxAge,
			"MAIN_QUEUE_URL":     out("MainQueueUrl"),
			"OPERATOR_QUEUE_URL": out("OperatorQueueUrl"),
			"MAX_ATTEMPTS":       p["MaxAttempts"],
			"BACKOFF_BASE":       p["BackoffBase"],
			"BACKOFF_RATE":       p["BackoffRate"],
			"MAX_DELAY":          p["MaxDelay"],
			"JITTER":             p["Jitter"],
		}
		if !maps.Equal(rep.Env, wantRep) {
			t.Errorf("replayer env\n got %v\nwant %v", rep.Env, wantRep)
		}

		// And the binaries start with it.
		pc, err := processorConfig(envconfig.Map(lambdaEnv(proc)), aws.Config{})
		if err != nil {
			t.Fatalf("processor refuses the deployed environment: %v", err)
		}
		if ddb, ok := pc.Store.(*dynamostore.Store); !ok || ddb.Table() != out("IdempotencyTableName") || pc.KeyPrefix != keyPrefix || strconv.Itoa(pc.MaxConcurrency) != p["RecordConcurrency"] {
			t.Errorf("processor config %+v", pc)
		}
		rc, err := replay.LoadConfig(envconfig.Map(lambdaEnv(rep)))
		if err != nil {
			t.Fatalf("replayer refuses the deployed environment: %v", err)
		}
		if rc.MainQueueURL != out("MainQueueUrl") || strconv.Itoa(rc.MaxAttempts) != p["MaxAttempts"] {
			t.Errorf("replayer config %+v", rc)
		}
	})

	t.Run("functions", func(t *testing.T) {
		for _, fn := range []samstack.Function{proc, rep} {
			if fn.Runtime != "provided.al2023" || fn.Handler != "bootstrap" || !strings.HasPrefix(fn.ARN, "arn:aws:lambda:") {
				t.Errorf("%s: %+v", fn.LogicalID, fn)
			}
		}
		if proc.ARN != out("ProcessorFunctionArn") || rep.ARN != out("DlqReplayerFunctionArn") {
			t.Error("function ARN outputs do not match the functions")
		}
	})
}

// lambdaEnv is the environment a function's process sees in Lambda: what the
// template sets plus what Lambda itself sets and the binaries read.
func lambdaEnv(fn samstack.Function) map[string]string {
	env := maps.Clone(fn.Env)
	env["AWS_LAMBDA_FUNCTION_NAME"] = fn.Name
	return env
}
