package localesm

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Handler is the signature of an SQS handler with partial batch responses, the
// one cmd/processor and cmd/dlq-replayer pass to lambda.Start.
type Handler func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)

// SQSAPI is the part of the SQS client the pollers use.
type SQSAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

var _ SQSAPI = (*sqs.Client)(nil)

var (
	// ErrConfig is wrapped by every configuration problem New reports.
	ErrConfig = errors.New("localesm: invalid configuration")
	// ErrTimeout is an invocation that outlived Config.Timeout.
	ErrTimeout = errors.New("handler timed out")
	// ErrPanic is an invocation whose handler panicked.
	ErrPanic = errors.New("handler panicked")
	// ErrInvalidResponse is a partial batch response Lambda would reject:
	// an empty itemIdentifier or one that names no record of the batch.
	ErrInvalidResponse = errors.New("invalid batchItemFailures")
)

// Limits and defaults of Lambda's SQS event source mapping.
const (
	MaxBatchSize          = 10000
	MaxBatchingWindow     = 300 * time.Second
	MaxWaitTime           = 20 * time.Second
	DefaultBatchSize      = 10
	DefaultPollers        = 2
	DefaultTimeout        = 3 * time.Second
	maxReceivePerCall     = 10
	deleteAttempts        = 3
	deleteTimeout         = 10 * time.Second
	receiveBackoffInitial = 100 * time.Millisecond
	receiveBackoffMax     = 5 * time.Second
)

// Config describes one event source mapping: a queue, a function and how the
// function is invoked.
type Config struct {
	// QueueURL is the queue to poll (required).
	QueueURL string
	// FunctionName names the function in logs and in the invocation's
	// lambdacontext; defaults to the queue's name.
	FunctionName string
	// BatchSize is the most records per invocation (1..10000, default 10).
	BatchSize int
	// BatchingWindow is how long to keep gathering records once the first
	// arrived, as MaximumBatchingWindowInSeconds (0..300 s, default 0).
	BatchingWindow time.Duration
	// Pollers is the number of concurrent pollers, each invoking the handler
	// one batch at a time (default 2).
	Pollers int
	// Timeout is the function timeout: the invocation's context deadline, after
	// which the invocation is abandoned and its records are left (default 3 s,
	// Lambda's default). Like Lambda, Check refuses a timeout longer than the
	// queue's visibility timeout: the records would come back, and be
	// processed again, while their invocation still runs.
	Timeout time.Duration
	// ReportBatchItemFailures is FunctionResponseTypes containing
	// ReportBatchItemFailures. Without it Lambda ignores the handler's
	// response: a successful invocation deletes the whole batch, whatever
	// batchItemFailures says.
	ReportBatchItemFailures bool
	// WaitTime is the long-poll wait of each ReceiveMessage (0..20 s, default
	// 20 s as Lambda uses). It does not delay stopping: Run cancels the poll.
	WaitTime time.Duration
	// OnInvoke, if set, is called after every invocation once its records
	// have been deleted. It runs on the poller's goroutine, concurrently with
	// other pollers: it must be safe for concurrent use and quick.
	OnInvoke func(Invocation)
	// Logger receives warnings about failed receives, deletes and invocations;
	// defaults to slog.Default().
	Logger *slog.Logger
}

// Invocation is the outcome of one handler invocation.
type Invocation struct {
	RequestID string
	Records   []events.SQSMessage
	Response  events.SQSEventResponse
	// Err is nil, the handler's error, or wraps ErrTimeout, ErrPanic or
	// ErrInvalidResponse. When set, no record was deleted.
	Err error
	// Deleted and Left are message ids: deleted from the queue, or left to its
	// visibility timeout and redrive policy.
	Deleted []string
	Left    []string
	// DeleteErr explains records in Left that the handler did not fail.
	DeleteErr error
	Started   time.Time
	Duration  time.Duration
}

// Mapping polls one queue and invokes one handler.
type Mapping struct {
	api     SQSAPI
	cfg     Config
	handler Handler
	log     *slog.Logger

	// Set by Check.
	checked                  bool
	arn, region, functionARN string

	// handlers counts handler goroutines, including abandoned ones, so Run
	// returns only when nothing it started is still running.
	handlers sync.WaitGroup
}

// New validates cfg and returns a Mapping; call Check, then Run.
func New(api SQSAPI, cfg Config, h Handler) (*Mapping, error) {
	if api == nil || h == nil {
		return nil, fmt.Errorf("%w: nil SQS client or handler", ErrConfig)
	}
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Mapping{api: api, cfg: cfg, handler: h, log: log.With("function", cfg.FunctionName)}, nil
}

func (c *Config) setDefaults() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...))
	}
	if c.QueueURL == "" {
		bad("QueueURL is required")
	}
	if c.FunctionName == "" {
		c.FunctionName = queueName(c.QueueURL)
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.BatchSize < 1 || c.BatchSize > MaxBatchSize {
		bad("BatchSize %d: must be 1..%d", c.BatchSize, MaxBatchSize)
	}
	if c.BatchingWindow < 0 || c.BatchingWindow > MaxBatchingWindow {
		bad("BatchingWindow %s: must be 0..%s", c.BatchingWindow, MaxBatchingWindow)
	}
	if c.BatchSize > maxReceivePerCall && c.BatchingWindow == 0 {
		// Lambda refuses this too: without a window it could never gather more
		// than one ReceiveMessage returns.
		bad("BatchSize %d above %d needs a BatchingWindow", c.BatchSize, maxReceivePerCall)
	}
	if c.Pollers == 0 {
		c.Pollers = DefaultPollers
	}
	if c.Pollers < 1 {
		bad("Pollers %d: must be at least 1", c.Pollers)
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Timeout < 0 {
		bad("Timeout %s: must be positive", c.Timeout)
	}
	if c.WaitTime == 0 {
		c.WaitTime = MaxWaitTime
	}
	if c.WaitTime < 0 || c.WaitTime > MaxWaitTime {
		bad("WaitTime %s: must be 0..%s", c.WaitTime, MaxWaitTime)
	}
	return errors.Join(errs...)
}

// Run polls until ctx is cancelled. In-flight invocations then finish (up to
// their timeout) and have their records deleted; Run returns once every
// handler goroutine it started has returned, abandoned ones included, so a
// handler that ignores its context's cancellation keeps Run waiting. Run
// calls Check first if it has not been called, and returns its error.
func (m *Mapping) Run(ctx context.Context) error {
	if err := m.Check(ctx); err != nil {
		return err
	}
	var pollers sync.WaitGroup
	for range m.cfg.Pollers {
		pollers.Go(func() { m.poll(ctx) })
	}
	pollers.Wait()
	m.handlers.Wait()
	return nil
}

// Check looks the queue up as Lambda does when a mapping is created: its ARN
// (every record's eventSourceARN) and its visibility timeout, which must not
// be shorter than the function timeout (an error wrapping ErrConfig). Call it
// for every mapping before running any, so a bad one stops nothing half
// started. It is not safe to call concurrently with Run.
func (m *Mapping) Check(ctx context.Context) error {
	if m.checked {
		return nil
	}
	out, err := m.api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(m.cfg.QueueURL),
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameQueueArn,
			sqstypes.QueueAttributeNameVisibilityTimeout,
		},
	})
	if err != nil {
		return fmt.Errorf("localesm: read the attributes of %s: %w", m.cfg.QueueURL, err)
	}
	arn := out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	if arn == "" {
		return fmt.Errorf("localesm: %s has no QueueArn attribute", m.cfg.QueueURL)
	}
	raw := out.Attributes[string(sqstypes.QueueAttributeNameVisibilityTimeout)]
	secs, err := strconv.Atoi(raw)
	if err != nil {
		return fmt.Errorf("localesm: %s has no valid VisibilityTimeout attribute (%q)", m.cfg.QueueURL, raw)
	}
	if visibility := time.Duration(secs) * time.Second; m.cfg.Timeout > visibility {
		// Lambda's CreateEventSourceMapping refuses this with
		// InvalidParameterValueException for the same reason.
		return fmt.Errorf("%w: function %s's timeout %s is longer than the visibility timeout %s of %s: its records would be delivered again while it still runs",
			ErrConfig, m.cfg.FunctionName, m.cfg.Timeout, visibility, m.cfg.QueueURL)
	}
	m.arn = arn
	m.region = regionFromARN(arn)
	account := "000000000000"
	if parts := strings.SplitN(arn, ":", 6); len(parts) == 6 && parts[4] != "" {
		account = parts[4]
	}
	m.functionARN = fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s", m.region, account, m.cfg.FunctionName)
	m.checked = true
	return nil
}

func (m *Mapping) poll(ctx context.Context) {
	backoff := receiveBackoffInitial
	for ctx.Err() == nil {
		msgs, err := m.collect(ctx)
		if ctx.Err() != nil {
			// Records received while stopping are not invoked: they come back
			// after the visibility timeout, as when Lambda disables a mapping.
			return
		}
		if err != nil {
			m.log.WarnContext(ctx, "receive failed", "queue", m.cfg.QueueURL, "error", err, "retryIn", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, receiveBackoffMax)
			continue
		}
		backoff = receiveBackoffInitial
		if len(msgs) > 0 {
			m.invoke(ctx, msgs)
		}
	}
}

// collect gathers one batch: a long poll until the first records arrive,
// then, with a batching window, more receives until the batch is full or the
// window has passed.
func (m *Mapping) collect(ctx context.Context) ([]sqstypes.Message, error) {
	var batch []sqstypes.Message
	var windowEnd time.Time
	for len(batch) < m.cfg.BatchSize {
		wait := m.cfg.WaitTime
		if len(batch) > 0 {
			remaining := time.Until(windowEnd)
			if m.cfg.BatchingWindow == 0 || remaining <= 0 {
				break
			}
			wait = min(remaining, MaxWaitTime)
		}
		out, err := m.api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(m.cfg.QueueURL),
			MaxNumberOfMessages:         int32(min(maxReceivePerCall, m.cfg.BatchSize-len(batch))),
			WaitTimeSeconds:             int32(math.Ceil(wait.Seconds())),
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil {
			if len(batch) > 0 {
				// Invoke with what we have rather than strand received records.
				return batch, nil
			}
			return nil, err
		}
		if len(out.Messages) == 0 && len(batch) == 0 {
			return nil, nil
		}
		if len(batch) == 0 {
			windowEnd = time.Now().Add(m.cfg.BatchingWindow)
		}
		batch = append(batch, out.Messages...)
	}
	return batch, nil
}

type outcome struct {
	resp events.SQSEventResponse
	err  error
}

func (m *Mapping) invoke(ctx context.Context, msgs []sqstypes.Message) {
	inv := Invocation{RequestID: newRequestID(), Started: time.Now()}

	ev, err := NewEvent(msgs, m.arn, m.region)
	inv.Records = ev.Records
	if err != nil {
		inv.Err = err
	} else {
		inv.Response, inv.Err = m.call(ctx, inv.RequestID, ev)
	}
	inv.Duration = time.Since(inv.Started)

	failed := map[string]bool{}
	if inv.Err == nil && m.cfg.ReportBatchItemFailures {
		failed, inv.Err = failedIDs(ev.Records, inv.Response)
	}
	var toDelete []sqstypes.Message
	for _, msg := range msgs {
		id := aws.ToString(msg.MessageId)
		if inv.Err != nil || failed[id] {
			inv.Left = append(inv.Left, id)
			continue
		}
		toDelete = append(toDelete, msg)
	}
	if len(toDelete) > 0 {
		// Deleting what succeeded must not depend on the caller still wanting
		// to poll: a stop after a successful invocation would otherwise
		// redeliver work that was done.
		delCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
		deleted, notDeleted, derr := m.deleteAll(delCtx, toDelete)
		cancel()
		inv.Deleted = deleted
		inv.Left = append(inv.Left, notDeleted...)
		inv.DeleteErr = derr
	}

	if inv.Err != nil {
		m.log.WarnContext(ctx, "invocation failed; its records are left to the visibility timeout",
			"requestId", inv.RequestID, "records", len(msgs), "error", inv.Err)
	}
	if inv.DeleteErr != nil {
		m.log.WarnContext(ctx, "delete failed; the records will be delivered again",
			"requestId", inv.RequestID, "records", len(inv.Left), "error", inv.DeleteErr)
	}
	if m.cfg.OnInvoke != nil {
		m.cfg.OnInvoke(inv)
	}
}

// call runs the handler with the function timeout as its deadline. A handler
// still running at the deadline is abandoned: its context is cancelled and
// its result, whenever it comes, is ignored.
func (m *Mapping) call(ctx context.Context, requestID string, ev events.SQSEvent) (events.SQSEventResponse, error) {
	// Like Lambda, a stop of the pollers does not cut short a running
	// invocation; only the function timeout does.
	invCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.Timeout)
	defer cancel()
	invCtx = lambdacontext.NewContext(invCtx, &lambdacontext.LambdaContext{
		AwsRequestID:       requestID,
		InvokedFunctionArn: m.functionARN,
	})

	done := make(chan outcome, 1)
	m.handlers.Add(1)
	go func() {
		defer m.handlers.Done()
		defer func() {
			if r := recover(); r != nil {
				done <- outcome{err: fmt.Errorf("%w: %v", ErrPanic, r)}
			}
		}()
		resp, err := m.handler(invCtx, ev)
		done <- outcome{resp: resp, err: err}
	}()

	select {
	case o := <-done:
		return o.resp, o.err
	case <-invCtx.Done():
		select {
		case o := <-done:
			return o.resp, o.err
		default:
		}
		return events.SQSEventResponse{}, fmt.Errorf("%w after %s", ErrTimeout, m.cfg.Timeout)
	}
}

// failedIDs checks a partial batch response the way Lambda does: an empty
// itemIdentifier, or one that is not a record of the batch, fails the batch.
func failedIDs(records []events.SQSMessage, resp events.SQSEventResponse) (map[string]bool, error) {
	inBatch := make(map[string]bool, len(records))
	for _, r := range records {
		inBatch[r.MessageId] = true
	}
	failed := make(map[string]bool, len(resp.BatchItemFailures))
	for _, f := range resp.BatchItemFailures {
		if f.ItemIdentifier == "" {
			return nil, fmt.Errorf("%w: empty itemIdentifier", ErrInvalidResponse)
		}
		if !inBatch[f.ItemIdentifier] {
			return nil, fmt.Errorf("%w: itemIdentifier %q is not a record of the batch", ErrInvalidResponse, f.ItemIdentifier)
		}
		failed[f.ItemIdentifier] = true
	}
	return failed, nil
}

// deleteAll deletes msgs in DeleteMessageBatch calls of up to 10 entries,
// retrying a whole call that failed; a per-entry failure is not retried (the
// message comes back, and the handler must already cope with redelivery).
func (m *Mapping) deleteAll(ctx context.Context, msgs []sqstypes.Message) (deleted, left []string, err error) {
	var errs []error
	for start := 0; start < len(msgs); start += maxReceivePerCall {
		chunk := msgs[start:min(start+maxReceivePerCall, len(msgs))]
		entries := make([]sqstypes.DeleteMessageBatchRequestEntry, len(chunk))
		for i, msg := range chunk {
			entries[i] = sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: msg.ReceiptHandle}
		}
		out, callErr := m.deleteChunk(ctx, entries)
		if callErr != nil {
			errs = append(errs, callErr)
			for _, msg := range chunk {
				left = append(left, aws.ToString(msg.MessageId))
			}
			continue
		}
		for _, f := range out.Failed {
			i, convErr := strconv.Atoi(aws.ToString(f.Id))
			if convErr != nil || i < 0 || i >= len(chunk) {
				errs = append(errs, fmt.Errorf("delete: unknown entry id %q in result", aws.ToString(f.Id)))
				continue
			}
			id := aws.ToString(chunk[i].MessageId)
			left = append(left, id)
			errs = append(errs, fmt.Errorf("delete %s: %s: %s", id, aws.ToString(f.Code), aws.ToString(f.Message)))
		}
		for _, s := range out.Successful {
			i, convErr := strconv.Atoi(aws.ToString(s.Id))
			if convErr != nil || i < 0 || i >= len(chunk) {
				continue
			}
			deleted = append(deleted, aws.ToString(chunk[i].MessageId))
		}
	}
	return deleted, left, errors.Join(errs...)
}

func (m *Mapping) deleteChunk(ctx context.Context, entries []sqstypes.DeleteMessageBatchRequestEntry) (*sqs.DeleteMessageBatchOutput, error) {
	wait := 100 * time.Millisecond
	var err error
	for attempt := range deleteAttempts {
		var out *sqs.DeleteMessageBatchOutput
		out, err = m.api.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(m.cfg.QueueURL), Entries: entries})
		if err == nil {
			return out, nil
		}
		if attempt == deleteAttempts-1 {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("delete batch: %w (after %v)", ctx.Err(), err)
		case <-time.After(wait):
		}
		wait *= 2
	}
	return nil, fmt.Errorf("delete batch: %w", err)
}

func queueName(url string) string {
	return url[strings.LastIndex(url, "/")+1:]
}

// newRequestID returns a random UUID-shaped id, as Lambda's request ids are.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
