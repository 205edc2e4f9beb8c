package sqsonce

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/sqsonce/sqsoncetest"
	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// The processor's tests run Handle on every store of procBackends: the
// in-memory store always (plain go test needs nothing but Go), and DynamoDB
// on moto_server when built with the integration tag
// (proc_setup_integration_test.go adds it). A backend brings the SQS side
// that goes with it: fakeQueues in memory, moto_server's queues with
// DynamoDB.

// procBackend is one store the processor's tests run on.
type procBackend struct {
	name string
	// open gives b its store, clock, fault injection, SQS client and
	// queues, and the table ConfigFromEnv is given.
	open func(t testing.TB, b *procBundle)
}

var memoryBackend = procBackend{name: "memory", open: openMemory}

// procBackends are the backends of the tests that hold on every store.
var procBackends = []procBackend{memoryBackend}

// eachBackend runs test, in parallel, as a subtest per backend.
func eachBackend(t *testing.T, test func(t *testing.T, be procBackend)) {
	t.Helper()
	for _, be := range procBackends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			test(t, be)
		})
	}
}

// procClock is the tests' clock: the memory store's own (so its TTL moves
// with the processor's time), or a testclock.
type procClock interface {
	Now() time.Time
	Advance(d time.Duration)
}

// faultInjector is where a backend fails the lock protocol's operations and
// counts calls: the Store itself in memory, the DynamoDB API with DynamoDB.
// ops are "acquire", "renew", "complete", "release" and "read".
type faultInjector interface {
	// fail makes every later call of op return err (nil: succeed again).
	fail(op string, err error)
	// calls is how many calls reached the backend since reset; opCalls
	// those of one op.
	calls() int
	opCalls(op string) int
	reset()
}

// sqsClient is the SQS client's part the processor calls.
type sqsClient interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// queueSide is a backend's queues: what the tests create, send to and read.
type queueSide interface {
	newQueue(t testing.TB, fifo bool, attrs map[string]string) (url string)
	queueARN(t testing.TB, url string) string
	// event sends bodies to url, each with the attribute trace=t-1, and
	// receives them back as the event Lambda would deliver.
	event(t testing.TB, url string, bodies ...string) events.SQSEvent
	// received is what arrived on url (waiting for want messages, where
	// arrival takes time).
	received(t testing.TB, url string, want int) []sqstypes.Message
	// missingQueue is the URL of a queue that does not exist.
	missingQueue(t testing.TB) string
}

// handlerSpy is a Handler that records its calls and answers with the
// error registered for the message, if any.
type handlerSpy struct {
	mu    sync.Mutex
	calls []string // message ids, in call order
	errs  map[string]error
	// hook, when set, runs inside each call before it returns.
	hook func(ctx context.Context, msg events.SQSMessage)
}

func (h *handlerSpy) handle(ctx context.Context, msg events.SQSMessage) error {
	if h.hook != nil {
		h.hook(ctx, msg)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, msg.MessageId)
	return h.errs[msg.MessageId]
}

func (h *handlerSpy) Calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls...)
}

// syncBuffer collects the processors' log lines and metrics.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *syncBuffer) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Reset()
}

// procBundle is a processor on a fresh store, with what its tests observe.
type procBundle struct {
	backend string
	logs    *syncBuffer
	metrics *syncBuffer // the processors' EMF lines
	cfg     ConsumerConfig
	// Set by the backend.
	table  string
	store  store.Store
	aws    aws.Config // the DynamoDB backend's (moto_server); zero in memory
	clock  procClock
	faults faultInjector
	sqs    sqsClient
	queues queueSide

	handler   *handlerSpy
	processor *Processor
}

// procSetup builds a processor on a fresh store of be, configured as the
// deployed function would be by its environment (KEY_PREFIX test,
// LOCK_TIMEOUT 60, DEDUPE_WINDOW 3600); configure adjusts the config before
// the processor is built.
func procSetup(t testing.TB, be procBackend, configure ...func(*ConsumerConfig)) *procBundle {
	t.Helper()
	b := &procBundle{
		backend: be.name,
		logs:    &syncBuffer{},
		metrics: &syncBuffer{},
		handler: &handlerSpy{errs: map[string]error{}},
	}
	be.open(t, b)
	cfg, err := ConfigFromEnv(envconfig.Map(map[string]string{
		"IDEMPOTENCY_TABLE": b.table,
		"KEY_PREFIX":        "test",
		"LOCK_TIMEOUT":      "60",
		"DEDUPE_WINDOW":     "3600",
	}))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store = b.store
	cfg.AWS = b.aws
	cfg.Test.Now = b.clock.Now
	cfg.Test.Rand = func() float64 { return 0.5 }
	cfg.Logger = slog.New(slog.NewJSONHandler(b.logs, nil))
	cfg.Metrics = b.metrics
	cfg.FunctionName = procFunction
	for _, f := range configure {
		f(&cfg)
	}
	b.cfg = cfg
	b.processor = b.newProcessor(t)
	return b
}

// newProcessor is another Lambda instance on the same store and clock,
// with b.cfg as it is now.
func (b *procBundle) newProcessor(t testing.TB) *Processor {
	t.Helper()
	return mustProcessor(t, b.cfg, b.handler.handle, b.sqs)
}

// procFunction is the FunctionName dimension of the tests' metrics.
const procFunction = "orders-processor"

// mustProcessor builds a processor with the SQS client s (nil: none, or
// the real one from cfg.AWS) and a completion sleep that returns at once.
func mustProcessor(t testing.TB, cfg ConsumerConfig, h Handler, s sqsClient) *Processor {
	t.Helper()
	p, err := newProcessor(cfg, h, deps{sqs: s, sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

func (b *procBundle) handle(t *testing.T, records ...events.SQSMessage) []string {
	t.Helper()
	return handleWith(t, b.processor, records...)
}

// handleWith runs records through p as one event and returns the ids it
// reported failed.
func handleWith(t *testing.T, p *Processor, records ...events.SQSMessage) []string {
	t.Helper()
	resp, err := p.Handle(context.Background(), events.SQSEvent{Records: records})
	if err != nil {
		t.Fatalf("Handle returned an error, which would fail the whole batch: %v", err)
	}
	return failedOf(resp)
}

func failedOf(resp events.SQSEventResponse) []string {
	ids := []string{}
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

// ordersARN is the queue the tests' records come from; it exists on no
// backend.
const ordersARN = "arn:aws:sqs:us-east-1:123456789012:orders"

// procRecord is a standard-queue record; opts adjust it.
func procRecord(id, body string, opts ...func(*events.SQSMessage)) events.SQSMessage {
	m := events.SQSMessage{
		MessageId:      id,
		ReceiptHandle:  "rh-" + id,
		Body:           body,
		Attributes:     map[string]string{"ApproximateReceiveCount": "1"},
		EventSource:    "aws:sqs",
		EventSourceARN: ordersARN,
		AWSRegion:      "us-east-1",
	}
	for _, o := range opts {
		o(&m)
	}
	return m
}

func withMsgAttr(name, dataType, value string) func(*events.SQSMessage) {
	return func(m *events.SQSMessage) {
		if m.MessageAttributes == nil {
			m.MessageAttributes = map[string]events.SQSMessageAttribute{}
		}
		m.MessageAttributes[name] = events.SQSMessageAttribute{DataType: dataType, StringValue: aws.String(value)}
	}
}

// inGroup puts a record on a FIFO queue, in message group group.
func inGroup(group string) func(*events.SQSMessage) {
	return func(m *events.SQSMessage) {
		m.EventSourceARN = "arn:aws:sqs:us-east-1:123456789012:orders.fifo"
		m.Attributes["MessageGroupId"] = group
	}
}

func receivedTimes(n string) func(*events.SQSMessage) {
	return func(m *events.SQSMessage) { m.Attributes["ApproximateReceiveCount"] = n }
}

func msgIDs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// receiveEvent makes a fresh queue with queueAttrs on b's backend, sends
// bodies to it and receives them back as the Lambda event the event source
// mapping would deliver.
func receiveEvent(t *testing.T, b *procBundle, queueAttrs map[string]string, bodies ...string) (string, events.SQSEvent) {
	t.Helper()
	url := b.queues.newQueue(t, false, queueAttrs)
	return url, b.queues.event(t, url, bodies...)
}

// openMemory is the memory backend: sqsoncetest's store, its clock, and
// fakeQueues.
func openMemory(_ testing.TB, b *procBundle) {
	mem := sqsoncetest.NewStore()
	st := &faultStore{Store: mem}
	queues := newFakeQueues()
	b.table = "unused" // ConfigFromEnv requires it; Config.Store replaces it
	b.store = st
	// A region, as Lambda gives one: New requires it when SQS is used, even
	// though the tests hand it the SQS fake. Its endpoint is a closed
	// loopback port and it has no credentials, so that a client built from
	// it by mistake can reach nothing.
	b.aws = aws.Config{Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:1")}
	b.clock = mem
	b.faults = st
	b.sqs = queues
	b.queues = queues
}

// faultStore is a Store that fails operations on demand, answers some as a
// client would whose first answer was lost (applied, then retried), and
// counts calls.
type faultStore struct {
	store.Store
	mu       sync.Mutex
	failures map[string]error
	// lost counts the next calls of an op to apply, and then apply again:
	// what the store sees of an SDK's retry of a call whose answer was
	// lost.
	lost   map[string]int
	counts map[string]int
}

var _ faultInjector = (*faultStore)(nil)

func (s *faultStore) fail(op string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failures == nil {
		s.failures = map[string]error{}
	}
	s.failures[op] = err
}

// loseAnswer makes the next call of op one whose first answer was lost.
func (s *faultStore) loseAnswer(op string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost == nil {
		s.lost = map[string]int{}
	}
	s.lost[op]++
}

// pendingLost is how many lost answers are still to come.
func (s *faultStore) pendingLost() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, k := range s.lost {
		n += k
	}
	return n
}

func (s *faultStore) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.counts {
		n += c
	}
	return n
}

func (s *faultStore) opCalls(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[op]
}

func (s *faultStore) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts = nil
}

// call counts op and says how to answer it.
func (s *faultStore) call(op string) (failure error, lost bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts == nil {
		s.counts = map[string]int{}
	}
	s.counts[op]++
	if s.lost[op] > 0 {
		s.lost[op]--
		lost = true
	}
	return s.failures[op], lost
}

func (s *faultStore) Acquire(ctx context.Context, req store.AcquireRequest) (store.Lease, error) {
	err, lost := s.call("acquire")
	if err != nil {
		return store.Lease{}, err
	}
	if lost {
		_, _ = s.Store.Acquire(ctx, req)
	}
	return s.Store.Acquire(ctx, req)
}

func (s *faultStore) Renew(ctx context.Context, lease store.Lease, lockUntil time.Time) (store.Lease, error) {
	err, lost := s.call("renew")
	if err != nil {
		return lease, err
	}
	if lost {
		_, _ = s.Store.Renew(ctx, lease, lockUntil)
	}
	return s.Store.Renew(ctx, lease, lockUntil)
}

func (s *faultStore) Complete(ctx context.Context, lease store.Lease, c store.Completion) error {
	err, lost := s.call("complete")
	if err != nil {
		return err
	}
	if lost {
		_ = s.Store.Complete(ctx, lease, c)
	}
	return s.Store.Complete(ctx, lease, c)
}

func (s *faultStore) Release(ctx context.Context, lease store.Lease, now time.Time) error {
	err, lost := s.call("release")
	if err != nil {
		return err
	}
	if lost {
		_ = s.Store.Release(ctx, lease, now)
	}
	return s.Store.Release(ctx, lease, now)
}

func (s *faultStore) Read(ctx context.Context, id string) (store.Record, error) {
	if err, _ := s.call("read"); err != nil {
		return store.Record{}, err
	}
	return s.Store.Read(ctx, id)
}

// fakeQueuePrefix starts the URL of every fake queue.
const fakeQueuePrefix = "https://sqs.us-east-1.amazonaws.com/123456789012/"

// fakeQueues is SQS in memory, as far as the processor uses it: queues
// that exist or not, sends to them, visibility changes, attributes. It
// records every visibility change asked for, accepted or not.
type fakeQueues struct {
	mu         sync.Mutex
	n          int
	queues     map[string]*fakeQueue // by URL
	visibility []*sqs.ChangeMessageVisibilityBatchInput
	// attributeReads counts GetQueueAttributes calls.
	attributeReads int
}

type fakeQueue struct {
	fifo  bool
	attrs map[string]string
	sent  []sqstypes.Message
}

var (
	_ sqsClient = (*fakeQueues)(nil)
	_ queueSide = (*fakeQueues)(nil)
)

func newFakeQueues() *fakeQueues { return &fakeQueues{queues: map[string]*fakeQueue{}} }

func (f *fakeQueues) newQueue(_ testing.TB, fifo bool, attrs map[string]string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	url := fakeQueuePrefix + "q-" + strconv.Itoa(f.n)
	if fifo {
		url += ".fifo"
	}
	// SQS's defaults, for the attributes a test does not set.
	q := &fakeQueue{fifo: fifo, attrs: map[string]string{"VisibilityTimeout": "30", "MessageRetentionPeriod": "345600"}}
	for k, v := range attrs {
		q.attrs[k] = v
	}
	f.queues[url] = q
	return url
}

func (f *fakeQueues) queueARN(_ testing.TB, url string) string {
	return "arn:aws:sqs:us-east-1:123456789012:" + path.Base(url)
}

func (f *fakeQueues) missingQueue(testing.TB) string { return fakeQueuePrefix + "does-not-exist" }

func (f *fakeQueues) event(t testing.TB, url string, bodies ...string) events.SQSEvent {
	var ev events.SQSEvent
	for i, body := range bodies {
		id := fmt.Sprintf("%s-m%d", path.Base(url), i)
		ev.Records = append(ev.Records, procRecord(id, body, withMsgAttr("trace", "String", "t-1"), func(m *events.SQSMessage) {
			m.EventSourceARN = f.queueARN(t, url)
			m.Attributes["ApproximateFirstReceiveTimestamp"] = strconv.FormatInt(time.Now().UnixMilli(), 10)
		}))
	}
	return ev
}

func (f *fakeQueues) received(t testing.TB, url string, _ int) []sqstypes.Message {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	q, ok := f.queues[url]
	if !ok {
		t.Fatalf("no fake queue %s", url)
	}
	return append([]sqstypes.Message(nil), q.sent...)
}

func (f *fakeQueues) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q, ok := f.queues[aws.ToString(in.QueueUrl)]
	if !ok {
		return nil, &sqstypes.QueueDoesNotExist{Message: aws.String("The specified queue does not exist.")}
	}
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		if q.fifo != (e.MessageGroupId != nil) {
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InvalidParameterValue"), SenderFault: true,
				Message: aws.String("MessageGroupId is required on a FIFO queue, and only there")})
			continue
		}
		id := fmt.Sprintf("sent-%d", len(q.sent))
		m := sqstypes.Message{MessageId: aws.String(id), Body: e.MessageBody, MessageAttributes: e.MessageAttributes, Attributes: map[string]string{}}
		if e.MessageGroupId != nil {
			m.Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)] = *e.MessageGroupId
		}
		q.sent = append(q.sent, m)
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String(id)})
	}
	return out, nil
}

// badReceiptHandle is a receipt handle SQS refuses.
const badReceiptHandle = "not-a-receipt-handle"

func (f *fakeQueues) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.visibility = append(f.visibility, in)
	if _, ok := f.queues[aws.ToString(in.QueueUrl)]; !ok {
		return nil, &sqstypes.QueueDoesNotExist{Message: aws.String("The specified queue does not exist.")}
	}
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		if aws.ToString(e.ReceiptHandle) == badReceiptHandle {
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), SenderFault: true})
			continue
		}
		out.Successful = append(out.Successful, sqstypes.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (f *fakeQueues) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attributeReads++
	q, ok := f.queues[aws.ToString(in.QueueUrl)]
	if !ok {
		return nil, &sqstypes.QueueDoesNotExist{Message: aws.String("The specified queue does not exist.")}
	}
	out := &sqs.GetQueueAttributesOutput{Attributes: map[string]string{}}
	for _, name := range in.AttributeNames {
		if v, ok := q.attrs[string(name)]; ok {
			out.Attributes[string(name)] = v
		}
	}
	return out, nil
}

// visibilityChanges are the entries of every visibility change asked for,
// by receipt handle.
func (f *fakeQueues) visibilityChanges() map[string]int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	got := map[string]int32{}
	for _, in := range f.visibility {
		for _, e := range in.Entries {
			got[aws.ToString(e.ReceiptHandle)] = e.VisibilityTimeout
		}
	}
	return got
}

// attr is the string value of a message attribute.
func attr(m sqstypes.Message, name string) string {
	return aws.ToString(m.MessageAttributes[name].StringValue)
}

// reasonOf is the sqs-once-reason of a forwarded message.
func reasonOf(m sqstypes.Message) Reason { return Reason(attr(m, sqsmsg.AttrReason)) }
