//go:build integration

package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
)

func TestMain(m *testing.M) { mototest.Main(m) }

// bundle is one test's replayer wired to fresh moto queues.
type bundle struct {
	t       *testing.T
	aws     aws.Config
	mainURL string
	opURL   string
	api     *spyAPI
	h       *Handler
	logs    *syncBuffer
	metrics *syncBuffer // the handler's EMF lines
}

type options struct {
	fifoMain, fifoOperator bool
	env                    map[string]string // overrides of the test defaults
	now                    func() time.Time  // the handler's clock; nil: time.Now
}

// setup builds a handler through LoadConfig, as main does. Defaults: JITTER
// none and BACKOFF_BASE 0, so replays are visible at once unless a test asks
// for a delay.
func setup(t *testing.T, o options) *bundle {
	t.Helper()
	cfg := mototest.Config(t)
	b := &bundle{t: t, aws: cfg, logs: &syncBuffer{}, metrics: &syncBuffer{}}
	b.mainURL = mototest.NewQueue(t, cfg, o.fifoMain, nil)
	b.opURL = mototest.NewQueue(t, cfg, o.fifoOperator, nil)
	env := map[string]string{"MAIN_QUEUE_URL": b.mainURL, "OPERATOR_QUEUE_URL": b.opURL, "JITTER": "none", "BACKOFF_BASE": "0"}
	maps.Copy(env, o.env)
	c, err := LoadConfig(envconfig.Map(env))
	if err != nil {
		t.Fatal(err)
	}
	b.api = &spyAPI{real: sqs.NewFromConfig(cfg), calls: map[string]int{}}
	log := slog.New(slog.NewJSONHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b.h = New(c, Deps{SQS: b.api, Rand: func() float64 { return 0.5 }, Now: o.now, Logger: log, Metrics: b.metrics, FunctionName: testFunction})
	return b
}

// handle runs the handler as Lambda would.
func (b *bundle) handle(recs ...events.SQSMessage) events.SQSEventResponse {
	b.t.Helper()
	resp, err := b.h.Handle(context.Background(), events.SQSEvent{Records: recs})
	if err != nil {
		b.t.Fatalf("Handle returned an error: %v", err)
	}
	return resp
}

// receive waits (boundedly) for want messages on a queue and fails if fewer
// arrive.
func (b *bundle) receive(url string, want int) []sqstypes.Message {
	b.t.Helper()
	got := mototest.Receive(b.t, b.aws, url, want, 10*time.Second)
	if len(got) != want {
		b.t.Fatalf("received %d messages from %s, want %d", len(got), url, want)
	}
	return got
}

// empty asserts nothing is visible on a queue right now.
func (b *bundle) empty(url string) {
	b.t.Helper()
	out, err := b.api.real.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10})
	if err != nil {
		b.t.Fatal(err)
	}
	if len(out.Messages) != 0 {
		b.t.Fatalf("%d unexpected messages on %s", len(out.Messages), url)
	}
}

// spyAPI counts SendMessageBatch calls per queue on the way to moto, and
// injects faults: entries with body failBody or one of failBodies fail
// individually, calls to failQueue fail as a whole. Set them before the
// handler runs; calls may come concurrently.
type spyAPI struct {
	real       *sqs.Client
	failBody   string
	failBodies map[string]bool
	failQueue  string

	mu         sync.Mutex
	calls      map[string]int
	visibility []int32 // every VisibilityTimeout asked for, in order
}

// ChangeMessageVisibilityBatch records the timeouts asked for on the way to
// moto.
func (s *spyAPI) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	s.mu.Lock()
	for _, e := range in.Entries {
		s.visibility = append(s.visibility, e.VisibilityTimeout)
	}
	s.mu.Unlock()
	return s.real.ChangeMessageVisibilityBatch(ctx, in, optFns...)
}

func (s *spyAPI) visibilities() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.visibility)
}

var errInjected = errors.New("injected: service unavailable")

func (s *spyAPI) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	s.mu.Lock()
	s.calls[aws.ToString(in.QueueUrl)]++
	s.mu.Unlock()
	if aws.ToString(in.QueueUrl) == s.failQueue {
		return nil, errInjected
	}
	pass := *in
	pass.Entries = nil
	var failed []sqstypes.BatchResultErrorEntry
	for _, e := range in.Entries {
		if body := aws.ToString(e.MessageBody); s.failBody != "" && body == s.failBody || s.failBodies[body] {
			failed = append(failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("injected"), SenderFault: false})
		} else {
			pass.Entries = append(pass.Entries, e)
		}
	}
	out := &sqs.SendMessageBatchOutput{}
	if len(pass.Entries) > 0 {
		var err error
		if out, err = s.real.SendMessageBatch(ctx, &pass, optFns...); err != nil {
			return nil, err
		}
	}
	out.Failed = append(out.Failed, failed...)
	return out, nil
}

func (s *spyAPI) callsTo(url string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[url]
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines returns the JSON log lines.
func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if l == "" {
			continue
		}
		m := map[string]any{}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// asRecord turns a received message into the record the DLQ would deliver,
// so a test can feed a replay back to the replayer.
func asRecord(m sqstypes.Message) events.SQSMessage {
	rec := events.SQSMessage{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
		Attributes: maps.Clone(m.Attributes), MessageAttributes: map[string]events.SQSMessageAttribute{}}
	for name, a := range m.MessageAttributes {
		rec.MessageAttributes[name] = events.SQSMessageAttribute{DataType: aws.ToString(a.DataType), StringValue: a.StringValue, BinaryValue: a.BinaryValue}
	}
	return rec
}

// attr returns a received message's attribute as "DataType:value" ("" when
// absent), binary values in hex.
func attr(m sqstypes.Message, name string) string {
	a, ok := m.MessageAttributes[name]
	if !ok {
		return ""
	}
	if a.BinaryValue != nil {
		return fmt.Sprintf("%s:%x", aws.ToString(a.DataType), a.BinaryValue)
	}
	return aws.ToString(a.DataType) + ":" + aws.ToString(a.StringValue)
}

// sameAttributes reports the attributes of want that m lacks or changed.
func sameAttributes(t *testing.T, m sqstypes.Message, want map[string]events.SQSMessageAttribute) {
	t.Helper()
	for name, w := range want {
		a, ok := m.MessageAttributes[name]
		if !ok || aws.ToString(a.DataType) != w.DataType || aws.ToString(a.StringValue) != aws.ToString(w.StringValue) ||
			(a.StringValue == nil) != (w.StringValue == nil) || !bytes.Equal(a.BinaryValue, w.BinaryValue) {
			t.Errorf("attribute %q = %s, want %s:%s%x", name, attr(m, name), w.DataType, aws.ToString(w.StringValue), w.BinaryValue)
		}
	}
}

func loadEvent(t *testing.T) events.SQSEvent {
	t.Helper()
	raw, err := os.ReadFile("testdata/dlq-event.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

var (
	_ sqsmsg.BatchSender = (*spyAPI)(nil)
	_ VisibilityChanger  = (*spyAPI)(nil)
)

// sentAt is a record's SentTimestamp.
func sentAt(t *testing.T, rec events.SQSMessage) time.Time {
	t.Helper()
	ms, err := strconv.ParseInt(rec.Attributes["SentTimestamp"], 10, 64)
	if err != nil {
		t.Fatalf("record %s: SentTimestamp %q", rec.MessageId, rec.Attributes["SentTimestamp"])
	}
	return time.UnixMilli(ms)
}
