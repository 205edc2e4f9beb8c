//go:build integration

package sqsonce

import (
	"bufio"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/local/lambdaruntime"
	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/metrics/metricstest"
)

// apiOrdersExampleDir is the program outside the module: its own go.mod, which
// replaces github.com/sqs-once/sqs-once with this checkout.
const apiOrdersExampleDir = "../examples/orders"

// The queue the emulated event source mapping reads, as the records name it.
const (
	apiOrdersQueueARN    = "arn:aws:sqs:" + motoserver.Region + ":123456789012:orders"
	apiOrdersFunctionARN = "arn:aws:lambda:" + motoserver.Region + ":123456789012:function:orders"
)

// apiOrdersInvokeTimeout is the function's timeout in the emulated Lambda. The
// processor keeps a tenth of it (1 s) for the batch's last calls.
const apiOrdersInvokeTimeout = 10 * time.Second

// TestAPIExternalProgramUnderLambdaRuntime: a program outside the module
// (examples/orders) builds against sqsonce with only its public names, runs
// under the Lambda Runtime API configured by environment variables alone, and costs, per record, 2 DynamoDB calls when new, 1 for a
// duplicate, 0 for a duplicate with the local cache warm, 2 for a failure;
// a payload mismatch and a Permanent error go to the operator queue with
// their reason. Every AWS call the binary makes passes a counting proxy, and
// each step asserts the exact calls it made, by operation.
func TestAPIExternalProgramUnderLambdaRuntime(t *testing.T) {
	// The build is bounded by go test's -timeout alone: on a cold build
	// cache it compiles the AWS SDK (some 100 s on 2 cores idle, minutes on
	// a loaded machine); with the cache warm the test takes 3 s.
	bin := apiBuildOrdersExample(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	cfg := mototest.Config(t)
	table := mototest.NewIdempotencyTable(t, cfg)
	operatorQueue := mototest.NewQueue(t, cfg, false, nil)
	proxy, err := faultproxy.Start(mototest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })

	// The whole configuration: what Lambda sets, what template.yaml sets,
	// and dummy credentials with the endpoint at the counting proxy.
	env := []string{
		"AWS_ACCESS_KEY_ID=testing",
		"AWS_SECRET_ACCESS_KEY=testing",
		"AWS_SESSION_TOKEN=testing",
		"AWS_REGION=" + motoserver.Region,
		"AWS_DEFAULT_REGION=" + motoserver.Region,
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=" + os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull,
		"AWS_ENDPOINT_URL=" + proxy.URL,
		"AWS_LAMBDA_FUNCTION_NAME=orders",
		"AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=256",
		"AWS_LAMBDA_LOG_FORMAT=JSON",
		"IDEMPOTENCY_TABLE=" + table,
		"KEY_PREFIX=orders",
		"IDEMPOTENCY_KEY=body:/orderId",
		"PAYLOAD_VALIDATION=on",
		"LOCAL_CACHE=100",
		"OPERATOR_QUEUE_URL=" + operatorQueue,
	}

	const (
		order     = `{"orderId":"A-1001","amountCents":1250}`
		reworded  = `{"orderId":"A-1001","amountCents":9999}`
		outage    = `{"orderId":"A-1002","amountCents":-100}`
		garbled   = `{"orderId":"A-1003","amountCents":"twelve"}`
		reworded2 = `{"orderId":"A-1001","amountCents":1}`
	)
	type step struct {
		name string
		body string
		// calls is every AWS call the record costs, by operation.
		calls map[string]int
		// failed: reported in batchItemFailures, for SQS to deliver again.
		failed bool
		// reason: forwarded to the operator queue with this
		// sqs-once-reason (and deleted from the source queue).
		reason string
	}
	processes := []struct {
		name  string
		steps []step
		// charged is how many times the handler charged A-1001 in this
		// process: the side effect itself, counted from its log.
		charged int
		// metrics are the sums of the EMF lines the process wrote to its
		// standard output (FromEnv's default), as CloudWatch would show.
		metrics map[string]float64
	}{
		{
			name: "first process",
			steps: []step{
				{name: "new order", body: order, calls: map[string]int{"UpdateItem": 2}},
				{name: "re-sent order with the cache warm", body: order, calls: map[string]int{}},
				{name: "failure", body: outage, calls: map[string]int{"UpdateItem": 2}, failed: true},
				{name: "permanent failure", body: garbled,
					calls:  map[string]int{"UpdateItem": 2, "SendMessageBatch": 1},
					reason: "permanent-error"},
				{name: "payload mismatch with the cache warm", body: reworded,
					calls: map[string]int{"SendMessageBatch": 1}, reason: "payload-mismatch"},
			},
			charged: 1,
			metrics: map[string]float64{"Processed": 1, "Duplicate": 1, "Failed": 1, "Failed/handler-error": 1,
				"ForwardedToOperator": 2, "ForwardedToOperator/permanent-error": 1, "ForwardedToOperator/payload-mismatch": 1},
		},
		{
			// A second execution environment: a cold start, nothing cached.
			name: "second process",
			steps: []step{
				{name: "payload mismatch", body: reworded2,
					calls: map[string]int{"UpdateItem": 1, "SendMessageBatch": 1}, reason: "payload-mismatch"},
				{name: "re-sent order", body: order, calls: map[string]int{"UpdateItem": 1}},
				{name: "re-sent order again, the cache warmed by the last", body: order, calls: map[string]int{}},
			},
			charged: 0,
			metrics: map[string]float64{"Duplicate": 2, "ForwardedToOperator": 1, "ForwardedToOperator/payload-mismatch": 1},
		},
	}

	// Configured by the environment alone, also when it is wrong: the init
	// phase fails with a message naming the variable, before any AWS call
	// or invocation, as Lambda reports an init failure.
	t.Run("bad configuration", func(t *testing.T) {
		rt, err := lambdaruntime.Start(apiOrdersFunctionARN)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rt.Close() })
		before := proxy.Stats().Requests
		bad := append(slices.Clone(env), "IDEMPOTENCY_KEY=body:orderId") // not a JSON pointer: the last one wins
		p, err := rt.StartProcess(bin, bad)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Kill() })
		if _, err := p.Invoke(ctx, apiLambdaSQSEvent(t, apiNewLambdaRecord(order)), apiOrdersInvokeTimeout); err == nil || !strings.Contains(err.Error(), "exited") {
			t.Fatalf("Invoke = %v; want the init to fail", err)
		}
		if out := p.Output(); !strings.Contains(out, "IDEMPOTENCY_KEY") {
			t.Errorf("init failure does not name IDEMPOTENCY_KEY:\n%s", out)
		}
		if got := apiCallsBetween(before, proxy.Stats().Requests); len(got) != 0 {
			t.Errorf("AWS calls %v during a failed init; want none", got)
		}
	})

	for _, proc := range processes {
		t.Run(proc.name, func(t *testing.T) {
			rt, err := lambdaruntime.Start(apiOrdersFunctionARN)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rt.Close() })
			started := time.Now()
			p, err := rt.StartProcess(bin, env)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := p.Kill(); err != nil {
					t.Error(err)
				}
				if t.Failed() {
					t.Logf("function output:\n%s", p.Output())
				}
			})
			for i, st := range proc.steps {
				t.Run(st.name, func(t *testing.T) {
					before := proxy.Stats().Requests
					rec := apiNewLambdaRecord(st.body)
					res, err := p.Invoke(ctx, apiLambdaSQSEvent(t, rec), apiOrdersInvokeTimeout)
					if err != nil || res.Error != nil {
						t.Fatalf("Invoke = %v, %v; want a batch response", res.Error, err)
					}
					if i == 0 {
						t.Logf("cold start and first invocation: %v", time.Since(started).Round(time.Millisecond))
					}
					var resp events.SQSEventResponse
					if err := json.Unmarshal(res.Payload, &resp); err != nil {
						t.Fatalf("response %s: %v", res.Payload, err)
					}
					var failed []string
					for _, f := range resp.BatchItemFailures {
						failed = append(failed, f.ItemIdentifier)
					}
					if want := apiFailedIDs(st.failed, rec.MessageID); !slices.Equal(failed, want) {
						t.Errorf("batchItemFailures %v; want %v", failed, want)
					}
					if got := apiCallsBetween(before, proxy.Stats().Requests); !maps.Equal(got, st.calls) {
						t.Errorf("AWS calls %v; want %v", got, st.calls)
					}
					if st.reason != "" {
						apiCheckOperatorMessage(t, cfg, operatorQueue, st.body, st.reason)
					}
				})
			}
			// Stopped before its output is read: Kill waits for the process
			// and for the copying of all it wrote.
			if err := p.Kill(); err != nil {
				t.Fatal(err)
			}
			if got := apiChargeLines(t, p.Output(), "A-1001"); got != proc.charged {
				t.Errorf("A-1001 charged %d times in this process; want %d", got, proc.charged)
			}
			// One set of metrics per invocation, named after the function.
			docs := metricstest.Check(t, metricstest.Lines(p.Output()), apiProcessorSpec("orders", started, time.Now(), len(proc.steps)))
			metricstest.CheckSums(t, docs, "orders", proc.metrics)
		})
	}
}

// apiBuildOrdersExample builds examples/orders, a module of its own that
// imports only sqsonce's public names, in the repository's workspace
// (go.work), which gives it this checkout's modules at the version its
// go.mod requires; with the module cache warm it builds offline. That a
// user's module builds against the published modules alone is
// releasecheck's (make release-check).
func apiBuildOrdersExample(t *testing.T) string {
	t.Helper()
	// go test caches this test's result keyed on the files the test binary
	// opens and stats, not on what the go build below reads: statting the
	// example's files makes an edit of the example run the test again.
	if err := filepath.WalkDir(apiOrdersExampleDir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			_, err = os.Stat(path)
		}
		return err
	}); err != nil {
		t.Fatalf("read %s: %v", apiOrdersExampleDir, err)
	}
	bin := filepath.Join(t.TempDir(), "bootstrap")
	start := time.Now()
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".")
	cmd.Dir = apiOrdersExampleDir
	// In the repository's workspace (go.work): the example builds against
	// this checkout's modules, as a user's module would against their release.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build in %s: %v\n%s", apiOrdersExampleDir, err, out)
	}
	t.Logf("go build %s: %v", apiOrdersExampleDir, time.Since(start).Round(time.Millisecond))
	return bin
}

// apiLambdaRecord is one SQS record in the JSON Lambda sends (compare
// internal/local/localesm/testdata/lambda-sqs-event.json), written out here rather
// than through aws-lambda-go's types, so the binary decodes Lambda's shape,
// not its own encoder's.
type apiLambdaRecord struct {
	MessageID              string            `json:"messageId"`
	ReceiptHandle          string            `json:"receiptHandle"`
	Body                   string            `json:"body"`
	Attributes             map[string]string `json:"attributes"`
	MessageAttributes      map[string]any    `json:"messageAttributes"`
	MD5OfMessageAttributes *string           `json:"md5OfMessageAttributes"`
	MD5OfBody              string            `json:"md5OfBody"`
	EventSource            string            `json:"eventSource"`
	EventSourceARN         string            `json:"eventSourceARN"`
	AWSRegion              string            `json:"awsRegion"`
}

// apiNewLambdaRecord is a first delivery of body, sent as a new message: a new
// message id, as a producer's re-send gets.
func apiNewLambdaRecord(body string) apiLambdaRecord {
	sum := md5.Sum([]byte(body))
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	return apiLambdaRecord{
		MessageID:     apiNewMessageID(),
		ReceiptHandle: "AQEB" + base64.StdEncoding.EncodeToString([]byte(apiNewMessageID())),
		Body:          body,
		Attributes: map[string]string{
			"ApproximateReceiveCount":          "1",
			"SentTimestamp":                    now,
			"SenderId":                         "AIDAIENQZJOLO23YVJ4VO",
			"ApproximateFirstReceiveTimestamp": now,
		},
		MessageAttributes: map[string]any{},
		MD5OfBody:         hex.EncodeToString(sum[:]),
		EventSource:       "aws:sqs",
		EventSourceARN:    apiOrdersQueueARN,
		AWSRegion:         motoserver.Region,
	}
}

func apiLambdaSQSEvent(t *testing.T, records ...apiLambdaRecord) []byte {
	t.Helper()
	b, err := json.Marshal(map[string][]apiLambdaRecord{"Records": records})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func apiNewMessageID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func apiFailedIDs(failed bool, id string) []string {
	if failed {
		return []string{id}
	}
	return nil
}

// apiCallsBetween is the requests made between two counts, by operation.
func apiCallsBetween(before, after map[string]int) map[string]int {
	d := map[string]int{}
	for op, n := range after {
		if n != before[op] {
			d[op] = n - before[op]
		}
	}
	return d
}

// apiCheckOperatorMessage receives the forwarded copy of body from the operator
// queue, checks its reason and deletes it.
func apiCheckOperatorMessage(t *testing.T, cfg aws.Config, queueURL, body, reason string) {
	t.Helper()
	msgs := mototest.Receive(t, cfg, queueURL, 1, 10*time.Second)
	if len(msgs) != 1 {
		t.Fatalf("operator queue: %d messages; want the forwarded record", len(msgs))
	}
	m := msgs[0]
	_, err := sqs.NewFromConfig(cfg).DeleteMessage(t.Context(), &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: m.ReceiptHandle})
	if err != nil {
		t.Fatalf("delete from the operator queue: %v", err)
	}
	if got := aws.ToString(m.Body); got != body {
		t.Errorf("operator queue got body %s; want %s", got, body)
	}
	if got := aws.ToString(m.MessageAttributes["sqs-once-reason"].StringValue); got != reason {
		t.Errorf("sqs-once-reason %q; want %q", got, reason)
	}
}

// apiChargeLines counts the example's "charging" log lines for orderID, and checks
// that each carried the key and a fencing token from Key and Fence.
func apiChargeLines(t *testing.T, output, orderID string) int {
	t.Helper()
	n := 0
	sc := bufio.NewScanner(strings.NewReader(output))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Message string `json:"message"`
			OrderID string `json:"orderId"`
			Key     string `json:"key"`
			Fence   int64  `json:"fence"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || line.Message != "charging" || line.OrderID != orderID {
			continue
		}
		n++
		if line.Key != orderID || line.Fence < 1 {
			t.Errorf("charging line %s: want key %s and a fence of at least 1", sc.Text(), orderID)
		}
	}
	return n
}
