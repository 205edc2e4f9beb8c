//go:build integration

package events_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/replay"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

func TestMain(m *testing.M) { mototest.Main(m) }

var (
	uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	arnRE  = regexp.MustCompile(`^arn:aws:sqs:([a-z0-9-]+):[0-9]{12}:[A-Za-z0-9_-]{1,75}(\.fifo)?$`)
)

func TestEventsHaveLambdasShape(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	client := sqs.NewFromConfig(cfg)
	queue := mototest.NewQueue(t, cfg, false, nil)
	for name := range tested {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			var generic struct {
				Records []struct {
					MessageAttributes map[string]map[string]any `json:"messageAttributes"`
				}
			}
			if err := json.Unmarshal(raw, &generic); err != nil {
				t.Fatal(err)
			}
			for i, r := range load(t, name).Records {
				m := arnRE.FindStringSubmatch(r.EventSourceARN)
				switch {
				case !uuidRE.MatchString(r.MessageId):
					t.Errorf("record %d: messageId %q is not a UUID", i, r.MessageId)
				case !strings.HasPrefix(r.ReceiptHandle, "AQEB") || len(r.ReceiptHandle) < 100:
					t.Errorf("record %d: receiptHandle %q does not look like SQS's", i, r.ReceiptHandle)
				case r.EventSource != "aws:sqs":
					t.Errorf("record %d: eventSource %q", i, r.EventSource)
				case m == nil || m[1] != r.AWSRegion:
					t.Errorf("record %d: eventSourceARN %q / awsRegion %q", i, r.EventSourceARN, r.AWSRegion)
				}
				sum := md5.Sum([]byte(r.Body))
				if hex.EncodeToString(sum[:]) != r.Md5OfBody {
					t.Errorf("record %d: md5OfBody %s is not the MD5 of the body", i, r.Md5OfBody)
				}
				for _, a := range []string{"ApproximateReceiveCount", "SentTimestamp", "SenderId", "ApproximateFirstReceiveTimestamp"} {
					if r.Attributes[a] == "" {
						t.Errorf("record %d: no attribute %s", i, a)
					}
				}
				if n, err := strconv.Atoi(r.Attributes["ApproximateReceiveCount"]); err != nil || n < 1 {
					t.Errorf("record %d: ApproximateReceiveCount %q", i, r.Attributes["ApproximateReceiveCount"])
				}
				fifo := strings.HasSuffix(r.EventSourceARN, ".fifo")
				for _, a := range []string{"MessageGroupId", "MessageDeduplicationId", "SequenceNumber"} {
					if _, ok := r.Attributes[a]; ok != fifo {
						t.Errorf("record %d: attribute %s present = %v on a queue that is FIFO = %v", i, a, ok, fifo)
					}
				}
				for attr, v := range generic.Records[i].MessageAttributes {
					// Lambda sends both lists, empty, on every attribute.
					for _, key := range []string{"stringListValues", "binaryListValues", "dataType"} {
						if _, ok := v[key]; !ok {
							t.Errorf("record %d: attribute %s lacks %s", i, attr, key)
						}
					}
					_, isBinary := v["binaryValue"]
					_, isString := v["stringValue"]
					dataType, _ := v["dataType"].(string)
					if isBinary == isString || isBinary != strings.HasPrefix(dataType, "Binary") {
						t.Errorf("record %d: attribute %s: value %v does not fit data type %v", i, attr, v, v["dataType"])
					}
				}
				if len(r.MessageAttributes) == 0 {
					if r.Md5OfMessageAttributes != "" {
						t.Errorf("record %d: md5OfMessageAttributes without attributes", i)
					}
					continue
				}
				// SQS's own digest of the attributes, as moto_server computes it
				// for the same message.
				out, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{
					QueueUrl: aws.String(queue), MessageBody: aws.String(r.Body), MessageAttributes: sqsmsg.Attributes(r.MessageAttributes),
				})
				if err != nil {
					t.Fatal(err)
				}
				if aws.ToString(out.MD5OfMessageAttributes) != r.Md5OfMessageAttributes {
					t.Errorf("record %d: md5OfMessageAttributes %s, SQS computes %s", i, r.Md5OfMessageAttributes, aws.ToString(out.MD5OfMessageAttributes))
				}
			}
		})
	}
}

// env returns events/env.json's variables for a function.
func env(t *testing.T, function string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("env.json")
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]map[string]string
	if err := json.Unmarshal(raw, &all); err != nil {
		t.Fatal(err)
	}
	e, ok := all[function]
	if !ok {
		t.Fatalf("env.json has no %s", function)
	}
	return e
}

// recorder is the processor's business handler: it records each call.
type recorder struct {
	mu    sync.Mutex
	calls []string // bodies, in call order
}

func (r *recorder) handle(_ context.Context, msg events.SQSMessage) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, msg.Body)
	return nil
}

func (r *recorder) bodies() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// processorConfig reads the processor's environment as cmd/processor does:
// sqsonce.ConfigFromEnv, and TARGET with targets.FromEnv; every bad variable
// at once.
func processorConfig(lookup envconfig.Lookup, awsCfg aws.Config) (sqsonce.ConsumerConfig, error) {
	cfg, err := sqsonce.ConfigFromEnv(lookup)
	tg, terr := targets.FromEnv(lookup, awsCfg, nil)
	cfg.AWS, cfg.Target = awsCfg, tg
	return cfg, errors.Join(err, terr)
}

type processorBundle struct {
	handler  *sqsonce.Processor
	calls    *recorder
	table    string
	prefix   string
	ddb      *dynamodb.Client
	ctx      context.Context
	response func(events.SQSEvent) events.SQSEventResponse
}

// setupProcessor builds the processor from env.json, its table and queue
// names replaced by ones on moto_server, and overrides applied.
func setupProcessor(t *testing.T, overrides map[string]string) *processorBundle {
	t.Helper()
	cfg := mototest.Config(t)
	e := env(t, "ProcessorFunction")
	e["IDEMPOTENCY_TABLE"] = mototest.NewIdempotencyTable(t, cfg)
	e["OPERATOR_QUEUE_URL"] = mototest.NewQueue(t, cfg, false, nil)
	maps.Copy(e, overrides)
	pcfg, err := processorConfig(envconfig.Map(e), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if pcfg.Target != nil {
		t.Fatalf("env.json sets TARGET=%s: these tests run the processor's handler", e["TARGET"])
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	b := &processorBundle{calls: &recorder{}, table: e["IDEMPOTENCY_TABLE"], prefix: pcfg.KeyPrefix, ddb: dynamodb.NewFromConfig(cfg), ctx: ctx}
	// As cmd/processor builds it, with moto's conditional writes made atomic
	// as DynamoDB's are: the duplicate event races two copies of one message.
	client := dynamodb.NewFromConfig(cfg)
	pcfg.Store = dynamostore.New(motoserver.Atomic(client), e["IDEMPOTENCY_TABLE"])
	b.handler, err = sqsonce.NewConsumer(pcfg, b.calls.handle)
	if err != nil {
		t.Fatal(err)
	}
	b.response = func(ev events.SQSEvent) events.SQSEventResponse {
		t.Helper()
		resp, err := b.handler.Handle(ctx, ev)
		if err != nil {
			t.Fatalf("Handle: %v", err)
		}
		return resp
	}
	return b
}

func (b *processorBundle) status(t *testing.T, key string) string {
	t.Helper()
	out, err := b.ddb.GetItem(b.ctx, &dynamodb.GetItemInput{
		TableName: aws.String(b.table), ConsistentRead: aws.Bool(true),
		Key: map[string]ddbtypes.AttributeValue{"id": &ddbtypes.AttributeValueMemberS{Value: b.prefix + "#" + key}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := out.Item["status"].(*ddbtypes.AttributeValueMemberS)
	if s == nil {
		return ""
	}
	return s.Value
}

func count(calls []string, body string) int {
	n := 0
	for _, c := range calls {
		if c == body {
			n++
		}
	}
	return n
}

func TestProcessorBatchWithDuplicate(t *testing.T) {
	t.Parallel()
	ev := load(t, "processor-batch-duplicate.json")
	for _, tt := range []struct {
		key string
		// Handled count of an order a producer re-sent later as a new
		// message (new messageId, same body).
		resent int
	}{
		{key: "messageId", resent: 2},     // a new messageId is a new message
		{key: "body:/orderId", resent: 1}, // the business key makes it a duplicate
	} {
		key := tt.key
		t.Run(key, func(t *testing.T) {
			t.Parallel()
			b := setupProcessor(t, map[string]string{"IDEMPOTENCY_KEY": key})
			resp := b.response(ev)
			// The two copies race: the loser sees the winner's lock and is
			// retried, or its completed record and is a duplicate. Either
			// way the order is handled once.
			dup := ev.Records[0].MessageId
			for _, f := range resp.BatchItemFailures {
				if f.ItemIdentifier != dup {
					t.Errorf("record %s failed", f.ItemIdentifier)
				}
			}
			// Lambda redelivers what failed; now everything is done.
			if again := b.response(ev); len(again.BatchItemFailures) != 0 {
				t.Errorf("second delivery failed %v", again.BatchItemFailures)
			}
			calls := b.calls.bodies()
			for _, r := range ev.Records[:2] {
				if n := count(calls, r.Body); n != 1 {
					t.Errorf("%s handled %d times, want 1", r.Body, n)
				}
			}

			// The producer retries: the same order as a new message.
			resend := ev.Records[0]
			resend.MessageId = "0b7c6d5e-4f3a-4b2c-9d1e-8f7a6b5c4d3e"
			resend.Attributes = maps.Clone(resend.Attributes)
			resend.Attributes["ApproximateReceiveCount"] = "1"
			if resp := b.response(events.SQSEvent{Records: []events.SQSMessage{resend}}); len(resp.BatchItemFailures) != 0 {
				t.Fatalf("re-send failed %v", resp.BatchItemFailures)
			}
			if n := count(b.calls.bodies(), resend.Body); n != tt.resent {
				t.Errorf("after a re-send with a new messageId, %s handled %d times, want %d", resend.Body, n, tt.resent)
			}
		})
	}
}

func TestProcessorFIFOBatch(t *testing.T) {
	t.Parallel()
	ev := load(t, "processor-fifo-batch.json")
	b := setupProcessor(t, nil)
	if resp := b.response(ev); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	calls := b.calls.bodies()
	if len(calls) != len(ev.Records) {
		t.Fatalf("handled %v", calls)
	}
	// Within a message group, in the order of the batch.
	var group []string
	for _, r := range ev.Records {
		if r.Attributes["MessageGroupId"] == "customer-17" {
			group = append(group, r.Body)
		}
	}
	var got []string
	for _, c := range calls {
		if slices.Contains(group, c) {
			got = append(got, c)
		}
	}
	if !slices.Equal(got, group) {
		t.Errorf("group customer-17 handled as %v, want %v", got, group)
	}
}

func TestProcessorReplayedRecord(t *testing.T) {
	t.Parallel()
	ev := load(t, "processor-replayed-record.json")
	rec := ev.Records[0]
	original := aws.ToString(rec.MessageAttributes[sqsmsg.AttrOriginalMessageID].StringValue)
	b := setupProcessor(t, nil)

	if resp := b.response(ev); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	// Keyed by the original message id, not the replay's new one.
	if s := b.status(t, original); s != "COMPLETED" {
		t.Errorf("record of the original id %s: %q, want COMPLETED", original, s)
	}
	if s := b.status(t, rec.MessageId); s != "" {
		t.Errorf("a record was written under the replay's own id: %q", s)
	}
	// The original message itself, delivered late, is now a duplicate.
	orig := rec
	orig.MessageId = original
	orig.MessageAttributes = map[string]events.SQSMessageAttribute{}
	if resp := b.response(events.SQSEvent{Records: []events.SQSMessage{orig}}); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	if n := count(b.calls.bodies(), rec.Body); n != 1 {
		t.Errorf("handled %d times, want 1", n)
	}
}

type replayerBundle struct {
	handler  *replay.Handler
	main, op string
	cfg      aws.Config
	sqs      *sqs.Client
	ctx      context.Context
}

// setupReplayer builds the replayer from env.json, its queues replaced by
// ones on moto_server. MAX_DELAY is 0 so replays arrive at once: the delays
// themselves are the jitter package's to test.
func setupReplayer(t *testing.T) *replayerBundle {
	t.Helper()
	cfg := mototest.Config(t)
	e := env(t, "DlqReplayerFunction")
	e["MAIN_QUEUE_URL"] = mototest.NewQueue(t, cfg, false, nil)
	e["OPERATOR_QUEUE_URL"] = mototest.NewQueue(t, cfg, false, nil)
	e["MAX_DELAY"] = "0"
	rcfg, err := replay.LoadConfig(envconfig.Map(e))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return &replayerBundle{
		handler: replay.NewHandler(rcfg, cfg), main: e["MAIN_QUEUE_URL"], op: e["OPERATOR_QUEUE_URL"],
		cfg: cfg, sqs: sqs.NewFromConfig(cfg), ctx: ctx,
	}
}

// queued returns how many messages a queue holds, delayed or not, without
// waiting.
func (b *replayerBundle) queued(t *testing.T, url string) int {
	t.Helper()
	out, err := b.sqs.GetQueueAttributes(b.ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, v := range out.Attributes {
		i, _ := strconv.Atoi(v)
		n += i
	}
	return n
}

func attr(m sqstypes.Message, name string) string {
	return aws.ToString(m.MessageAttributes[name].StringValue)
}

func TestReplayer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file    string
		toMain  bool
		count   string // sqs-dlq-replay-nb on the message sent
		reason  string // sqs-once-reason, for the operator queue
		origKey string // where the original id comes from: "" = the record's messageId
	}{
		{file: "replayer-first-replay.json", toMain: true, count: "1"},
		{file: "replayer-last-attempt.json", toMain: true, count: "3", origKey: sqsmsg.AttrOriginalMessageID},
		{file: "replayer-over-limit.json", count: "3", reason: "max-attempts", origKey: sqsmsg.AttrOriginalMessageID},
		// The bad counter is kept as it came, for the operator to see.
		{file: "replayer-invalid-counter.json", count: "abc", reason: "invalid-counter"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			ev := load(t, tt.file)
			rec := ev.Records[0]
			b := setupReplayer(t)
			resp, err := b.handler.Handle(b.ctx, ev)
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("failures %v, err %v", resp.BatchItemFailures, err)
			}
			dest, other := b.op, b.main
			if tt.toMain {
				dest, other = b.main, b.op
			}
			if n := b.queued(t, other); n != 0 {
				t.Errorf("%d messages on the wrong queue", n)
			}
			got := mototest.Receive(t, b.cfg, dest, 1, 5*time.Second)
			if len(got) != 1 {
				t.Fatalf("%d messages at the destination, want 1", len(got))
			}
			m := got[0]
			if aws.ToString(m.Body) != rec.Body {
				t.Errorf("body %q, want %q", aws.ToString(m.Body), rec.Body)
			}
			if tt.count != "" && attr(m, sqsmsg.AttrReplayCount) != tt.count {
				t.Errorf("%s = %q, want %s", sqsmsg.AttrReplayCount, attr(m, sqsmsg.AttrReplayCount), tt.count)
			}
			if tt.reason != "" && attr(m, sqsmsg.AttrReason) != tt.reason {
				t.Errorf("%s = %q, want %s", sqsmsg.AttrReason, attr(m, sqsmsg.AttrReason), tt.reason)
			}
			wantOrig := rec.MessageId
			if tt.origKey != "" {
				wantOrig = aws.ToString(rec.MessageAttributes[tt.origKey].StringValue)
			}
			if tt.toMain && attr(m, sqsmsg.AttrOriginalMessageID) != wantOrig {
				t.Errorf("%s = %q, want %s", sqsmsg.AttrOriginalMessageID, attr(m, sqsmsg.AttrOriginalMessageID), wantOrig)
			}
			// Every other attribute of the dead letter is kept.
			for name, a := range rec.MessageAttributes {
				if name == sqsmsg.AttrReplayCount || name == sqsmsg.AttrOriginalMessageID {
					continue
				}
				if attr(m, name) != aws.ToString(a.StringValue) {
					t.Errorf("attribute %s = %q, want %q", name, attr(m, name), aws.ToString(a.StringValue))
				}
			}
		})
	}
}

func TestReplayerBinaryAttributes(t *testing.T) {
	t.Parallel()
	ev := load(t, "replayer-binary-attributes.json")
	rec := ev.Records[0]
	b := setupReplayer(t)
	resp, err := b.handler.Handle(b.ctx, ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v, err %v", resp.BatchItemFailures, err)
	}
	got := mototest.Receive(t, b.cfg, b.main, 1, 5*time.Second)
	if len(got) != 1 {
		t.Fatalf("%d messages on the main queue, want 1", len(got))
	}
	attrs := got[0].MessageAttributes
	if len(rec.MessageAttributes) == 0 {
		t.Fatal("the event has no attributes to check")
	}
	for _, name := range slices.Sorted(maps.Keys(rec.MessageAttributes)) {
		want := rec.MessageAttributes[name]
		a, ok := attrs[name]
		if !ok {
			t.Errorf("attribute %s lost", name)
			continue
		}
		if aws.ToString(a.DataType) != want.DataType || !bytes.Equal(a.BinaryValue, want.BinaryValue) || aws.ToString(a.StringValue) != aws.ToString(want.StringValue) {
			t.Errorf("attribute %s = {%s %q %x}, want {%s %q %x}", name,
				aws.ToString(a.DataType), aws.ToString(a.StringValue), a.BinaryValue,
				want.DataType, aws.ToString(want.StringValue), want.BinaryValue)
		}
	}
}

// A dead letter first enqueued on 2026-01-01 (sqs-once-first-sent, stamped by
// its first replay) is older than MAX_MESSAGE_AGE: it goes to the operator
// queue as expired, its first enqueue and its replays so far kept.
func TestReplayerExpired(t *testing.T) {
	t.Parallel()
	ev := load(t, "replayer-expired.json")
	rec := ev.Records[0]
	cfg := mototest.Config(t)
	e := env(t, "DlqReplayerFunction")
	e["MAIN_QUEUE_URL"] = mototest.NewQueue(t, cfg, false, nil)
	e["OPERATOR_QUEUE_URL"] = mototest.NewQueue(t, cfg, false, nil)
	e["MAX_MESSAGE_AGE"] = "86400"
	rcfg, err := replay.LoadConfig(envconfig.Map(e))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := replay.NewHandler(rcfg, cfg).Handle(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v, err %v", resp.BatchItemFailures, err)
	}
	got := mototest.Receive(t, cfg, e["OPERATOR_QUEUE_URL"], 1, 5*time.Second)
	if len(got) != 1 {
		t.Fatalf("%d messages at the operator queue, want 1", len(got))
	}
	want := map[string]string{
		sqsmsg.AttrReason:            replay.ReasonExpired,
		sqsmsg.AttrFirstSent:         aws.ToString(rec.MessageAttributes[sqsmsg.AttrFirstSent].StringValue),
		sqsmsg.AttrReplayCount:       "1",
		sqsmsg.AttrOriginalMessageID: aws.ToString(rec.MessageAttributes[sqsmsg.AttrOriginalMessageID].StringValue),
		"tenant":                     "acme",
	}
	for name, w := range want {
		if attr(got[0], name) != w {
			t.Errorf("%s = %q, want %q", name, attr(got[0], name), w)
		}
	}
	if m := mototest.Receive(t, cfg, e["MAIN_QUEUE_URL"], 1, time.Second); len(m) != 0 {
		t.Errorf("%d messages replayed, want none", len(m))
	}
}
