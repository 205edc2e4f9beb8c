package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqs-once/sqs-once/internal/local/localesm"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// tryWatchEvery is how often the try-out reads the queue's event source
// mappings on moto_server: a cutover or a rollback by the CLI is followed
// within this long.
const tryWatchEvery = 250 * time.Millisecond

// standInTimeout is the stand-in consumer's function timeout, as created
// on moto_server (createStandIn).
const standInTimeout = 10 * time.Second

// lineWriter writes whole lines to w, one at a time: the stand-in, the
// processor and the mapping watcher print from their own goroutines.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format+"\n", args...)
}

// standIn is the stand-in consumer: a Lambda handler of SQS events that
// "processes" each record by logging a run, counted per order, so that a
// user sees how often the consumer ran for one order.
type standIn struct {
	name string
	out  *lineWriter
	mu   sync.Mutex
	runs map[string]int
}

func newStandIn(name string, out *lineWriter) *standIn {
	return &standIn{name: name, out: out, runs: map[string]int{}}
}

// handler is the stand-in's handler for records that reach it by way, the
// words its log line ends with.
func (s *standIn) handler(way string) localesm.Handler {
	return func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		for _, rec := range ev.Records {
			order := orderOf(rec.Body)
			s.mu.Lock()
			s.runs[order]++
			n := s.runs[order]
			s.mu.Unlock()
			s.out.printf("%s: run %d for order %s (message %s, %s)", s.name, n, order, rec.MessageId, way)
		}
		return events.SQSEventResponse{}, nil
	}
}

// orderOf names a message's order: its body's orderId, or the body itself
// (shortened) when it has none.
func orderOf(body string) string {
	var b struct {
		OrderID any `json:"orderId"`
	}
	if json.Unmarshal([]byte(body), &b) == nil && b.OrderID != nil {
		return fmt.Sprint(b.OrderID)
	}
	if len(body) > 40 {
		body = body[:40] + "..."
	}
	return fmt.Sprintf("%q", body)
}

// invokeRouter is the HTTP client of the processor's Lambda target: an
// Invoke of the stand-in consumer runs its handler here, as Lambda would
// run the function, with Lambda's answer (the handler's response, or
// X-Amz-Function-Error); every other request goes to moto_server, whose
// Lambda runs no code.
type invokeRouter struct {
	next     aws.HTTPClient
	function string
	handler  localesm.Handler
	timeout  time.Duration
}

// invokePath is the Invoke API's path: /2015-03-31/functions/{name}/invocations.
const invokePathPrefix, invokePathSuffix = "/2015-03-31/functions/", "/invocations"

func (r invokeRouter) Do(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || !r.invokesStandIn(req.URL) {
		return r.next.Do(req)
	}
	var ev events.SQSEvent
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err == nil {
		err = json.Unmarshal(body, &ev)
	}
	if err != nil {
		return lambdaAnswer(req, http.StatusOK, "Unhandled", fmt.Sprintf(`{"errorMessage":%q,"errorType":"InvalidEvent"}`, err.Error())), nil
	}
	ctx, cancel := context.WithTimeout(req.Context(), r.timeout)
	defer cancel()
	resp, err := r.handler(ctx, ev)
	if err != nil {
		return lambdaAnswer(req, http.StatusOK, "Unhandled", fmt.Sprintf(`{"errorMessage":%q,"errorType":"HandlerError"}`, err.Error())), nil
	}
	out, err := json.Marshal(resp)
	if err != nil {
		return nil, err
	}
	return lambdaAnswer(req, http.StatusOK, "", string(out)), nil
}

// invokesStandIn reports whether u is an Invoke of the stand-in, by name
// or ARN (with or without a qualifier).
func (r invokeRouter) invokesStandIn(u *url.URL) bool {
	rest, ok := strings.CutPrefix(u.EscapedPath(), invokePathPrefix)
	if !ok {
		return false
	}
	fn, ok := strings.CutSuffix(rest, invokePathSuffix)
	if !ok {
		return false
	}
	fn, err := url.PathUnescape(fn)
	if err != nil {
		return false
	}
	if i := strings.Index(fn, ":function:"); i >= 0 {
		fn = fn[i+len(":function:"):]
	}
	fn, _, _ = strings.Cut(fn, ":")
	return fn == r.function
}

// lambdaAnswer is the Invoke API's answer: the payload, and
// X-Amz-Function-Error when the function failed.
func lambdaAnswer(req *http.Request, status int, functionError, payload string) *http.Response {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Amz-Executed-Version", "$LATEST")
	if functionError != "" {
		h.Set("X-Amz-Function-Error", functionError)
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader([]byte(payload))), ContentLength: int64(len(payload)),
		Request: req,
	}
}

// tryWaitTime is the long poll of the try-out's mappings: short, because
// a mapping switched off waits for its polls to end (releasingQueue).
const tryWaitTime = 2 * time.Second

// releaseTimeout bounds the release of a stopped mapping's records, also
// on Ctrl-C.
const releaseTimeout = 10 * time.Second

// releasingQueue is a mapping's SQS client that can be switched off without
// stranding a message. moto_server keeps a long poll running after its
// client has gone, and hands the next message sent to that dead poll, hidden
// for the visibility timeout (3 minutes here): after a cutover, the first
// order the user sent would vanish into the consumer's last poll. So each
// receive runs to its end even when the mapping stops, and what the mapping
// received but did not invoke its function with is made visible again when
// it stops (release), as records not yet handed to a function come back
// when Lambda disables a mapping.
type releasingQueue struct {
	localesm.SQSAPI
	api *sqs.Client
	mu  sync.Mutex
	// held are the receipt handles of records received and not yet handed
	// to the function.
	held map[string]bool
}

func newReleasingQueue(api *sqs.Client) *releasingQueue {
	return &releasingQueue{SQSAPI: api, api: api, held: map[string]bool{}}
}

// ReceiveMessage receives as the client does, but is not cut off by ctx:
// the poll ends on the server's side too. It is bounded by its own wait
// time and the client's retries.
func (q *releasingQueue) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	bound := time.Duration(in.WaitTimeSeconds)*time.Second + time.Minute
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	defer cancel()
	out, err := q.SQSAPI.ReceiveMessage(rctx, in, optFns...)
	if err != nil {
		return out, err
	}
	q.mu.Lock()
	for _, m := range out.Messages {
		q.held[aws.ToString(m.ReceiptHandle)] = true
	}
	q.mu.Unlock()
	return out, nil
}

// handing wraps h: the records it is invoked with are no longer held.
func (q *releasingQueue) handing(h localesm.Handler) localesm.Handler {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		q.mu.Lock()
		for _, r := range ev.Records {
			delete(q.held, r.ReceiptHandle)
		}
		q.mu.Unlock()
		return h(ctx, ev)
	}
}

// release makes every record received and never handed to the function
// visible again, once the mapping has stopped.
func (q *releasingQueue) release(ctx context.Context, queueURL string) error {
	q.mu.Lock()
	held := q.held
	q.held = map[string]bool{}
	q.mu.Unlock()
	var errs []error
	for h := range held {
		if _, err := q.api.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl: aws.String(queueURL), ReceiptHandle: aws.String(h), VisibilityTimeout: 0,
		}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// tryPipeline runs the stand-in consumer and the stack's processor the way
// Lambda would on AWS: each through a local event source mapping
// (localesm) on the queue, polling while its mapping on moto_server is
// Enabled. So before the cutover the consumer reads the queue itself; the
// CLI's cutover switches the two mappings on moto_server and the pipeline
// follows, the processor then handing each message it holds to the
// consumer (a lambda target's Invoke), and a rollback returns the queue to
// the consumer.
//
// moto_server itself also acts on an Enabled mapping: on each SendMessage it
// receives the queue's visible messages and invokes the function in Docker.
// Without Docker that invocation fails at once and the messages are made
// visible again, so the local mappings still get every message; each such
// receive counts towards the redrive policy's maxReceiveCount, which is why
// a record's receiveCount in the functions' log can be 2.
type tryPipeline struct {
	lambda   *lambda.Client
	queueARN string
	out      *lineWriter
	// The two functions on the queue: the consumer's mapping, then the
	// stack's processor's.
	functions [2]tryFunction
}

// tryFunction is one function that may consume the queue.
type tryFunction struct {
	name     string
	mapping  *localesm.Mapping
	queue    *releasingQueue
	queueURL string
	// on and off are the lines printed when its mapping is switched on
	// and off.
	on, off string
}

// newTryPipeline builds the processor as cmd/processor would from the
// deployed function's environment (its store the stack's table, its lambda
// TARGET the stand-in), and both functions' local mappings; nothing polls
// yet. fnLog receives the functions' and the SDK's log lines.
func newTryPipeline(ctx context.Context, awsCfg aws.Config, p tryParams, queueURL, queueARN string, info *stackInfo, out *lineWriter, fnLog *slog.Logger) (*tryPipeline, error) {
	consumer := newStandIn(p.consumer, out)
	spec, err := targets.ParseSpec(info.deployedTarget())
	if err != nil || spec.Kind != targets.Lambda || spec.FunctionName() != p.consumer {
		return nil, fmt.Errorf("%s's TARGET is %q: the try-out runs a lambda: target, the stand-in consumer %s", processorFunction, info.deployedTarget(), p.consumer)
	}
	// The processor's calls reach moto_server, but an Invoke of the
	// stand-in runs it here.
	procAWS := awsCfg.Copy()
	next := procAWS.HTTPClient
	if next == nil {
		next = awshttp.NewBuildableClient()
	}
	procAWS.HTTPClient = invokeRouter{next: next, function: p.consumer, handler: consumer.handler("handed over by the stack's processor"), timeout: standInTimeout}
	procLog := fnLog.With("function", info.processor.Name)
	tg, err := targets.FromEnv(lambdaEnv(info.processor), procAWS, procLog)
	if err != nil {
		return nil, fmt.Errorf("%s's environment: %w", processorFunction, err)
	}
	cfg := info.processorCfg
	cfg.Target, cfg.AWS, cfg.Logger = tg, procAWS, procLog
	// moto checks a condition and writes without a lock between the two:
	// made atomic per item, as DynamoDB's conditional writes are, so two
	// copies of an order racing each other show what DynamoDB would do.
	cfg.Store = dynamostore.New(serializeWrites(dynamodb.NewFromConfig(awsCfg)), info.table)
	// The deployed function's metrics go to CloudWatch through its log;
	// here they would only fill the terminal.
	cfg.Metrics = io.Discard
	var dupMu sync.Mutex
	duplicates := 0
	cfg.OnOutcome = func(_ context.Context, o sqsonce.Outcome) {
		switch o.Kind {
		case sqsonce.KindProcessed:
			out.printf("%s: key %s processed: handed to %s, completed (message %s)", info.processor.Name, o.Key, p.consumer, o.MessageID)
		case sqsonce.KindDuplicate:
			dupMu.Lock()
			duplicates++
			n := duplicates
			dupMu.Unlock()
			out.printf("%s: key %s duplicate: already completed, deleted without running %s (message %s; %s so far)", info.processor.Name, o.Key, p.consumer, o.MessageID, count(n, "duplicate"))
		default:
			what := string(o.Kind)
			if o.Reason != "" {
				what += " (" + string(o.Reason) + ")"
			}
			out.printf("%s: key %s %s (message %s): see sqs-once inspect and status", info.processor.Name, o.Key, what, o.MessageID)
		}
	}
	proc, err := sqsonce.NewConsumer(cfg, nil)
	if err != nil {
		return nil, fmt.Errorf("the stack's processor: %w", err)
	}
	consQ, procQ := newReleasingQueue(sqs.NewFromConfig(awsCfg)), newReleasingQueue(sqs.NewFromConfig(awsCfg))
	consCfg := localesm.Config{QueueURL: queueURL, FunctionName: p.consumer, Timeout: standInTimeout, WaitTime: tryWaitTime, Logger: fnLog}
	consESM, err := localesm.New(consQ, consCfg, consQ.handing(consumer.handler("read by its own mapping")))
	if err != nil {
		return nil, err
	}
	procCfg := esmConfig(info.processor, info.processorESM, info.mainURL, 2)
	procCfg.Logger, procCfg.WaitTime = procLog, tryWaitTime
	procESM, err := localesm.New(procQ, procCfg, procQ.handing(proc.Handle))
	if err != nil {
		return nil, err
	}
	for _, m := range []*localesm.Mapping{consESM, procESM} {
		if err := m.Check(ctx); err != nil {
			return nil, err
		}
	}
	return &tryPipeline{
		lambda: lambda.NewFromConfig(awsCfg), queueARN: queueARN, out: out,
		functions: [2]tryFunction{
			{name: p.consumer, mapping: consESM, queue: consQ, queueURL: queueURL,
				on:  p.consumer + " reads " + p.queueName + " (its mapping is Enabled)",
				off: p.consumer + " stops reading " + p.queueName + " (its mapping is Disabled)"},
			{name: info.processor.Name, mapping: procESM, queue: procQ, queueURL: info.mainURL,
				on:  "the stack's processor " + info.processor.Name + " reads " + p.queueName + " and hands each new order to " + p.consumer + " (its mapping is Enabled)",
				off: "the stack's processor " + info.processor.Name + " stops reading " + p.queueName + " (its mapping is Disabled)"},
		},
	}, nil
}

// enabled reads which of the pipeline's functions have an Enabled mapping
// on the queue, on moto_server: what the CLI's cutover and rollback set.
func (t *tryPipeline) enabled(ctx context.Context) ([2]bool, error) {
	var on [2]bool
	pages := lambda.NewListEventSourceMappingsPaginator(t.lambda, &lambda.ListEventSourceMappingsInput{EventSourceArn: aws.String(t.queueARN)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return on, err
		}
		for _, m := range page.EventSourceMappings {
			if aws.ToString(m.State) != "Enabled" {
				continue
			}
			for i, f := range t.functions {
				if strings.HasSuffix(aws.ToString(m.FunctionArn), ":function:"+f.name) {
					on[i] = true
				}
			}
		}
	}
	return on, nil
}

// run polls the queue through each function whose mapping on moto_server
// is Enabled, following the switches, until ctx ends; it returns once
// nothing it started runs any more.
func (t *tryPipeline) run(ctx context.Context) {
	var stops [2]func()
	defer func() {
		for _, stop := range stops {
			if stop != nil {
				stop()
			}
		}
	}()
	tick := time.NewTicker(tryWatchEvery)
	defer tick.Stop()
	failing := false
	for {
		on, err := t.enabled(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			// Said once, not every tick: the next read that works
			// resumes following the switches.
			failing = true
			t.out.printf("cannot read the mappings of %s on moto_server (%v): the functions keep their last state", t.queueARN, err)
		case err == nil:
			failing = false
			// Off first: at a cutover the consumer stops before the
			// processor starts, as the CLI switches them.
			for i, f := range t.functions {
				if !on[i] && stops[i] != nil {
					stops[i]()
					stops[i] = nil
					t.out.printf("%s", f.off)
				}
			}
			for i, f := range t.functions {
				if on[i] && stops[i] == nil {
					stops[i] = t.start(ctx, f)
					t.out.printf("%s", f.on)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// start runs f's mapping until the returned stop is called; stop returns
// once the mapping has stopped, its in-flight invocations finished and the
// records it held released.
func (t *tryPipeline) start(ctx context.Context, f tryFunction) (stop func()) {
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Checked before the first start: Run cannot fail here.
		_ = f.mapping.Run(runCtx)
	}()
	return func() {
		cancel()
		<-done
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		if err := f.queue.release(rctx, f.queueURL); err != nil {
			t.out.printf("%s: could not make the messages it held visible again (they come back after the visibility timeout): %v", f.name, err)
		}
	}
}
