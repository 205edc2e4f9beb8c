package demo

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// What the target answered for one message the processor handed it.
const (
	ForwardAccepted = "accepted"
	// ForwardUnknown: the target could not tell whether the destination
	// took the message (sqsonce.ErrOutcomeUnknown); the processor keeps the
	// lock until it expires, then the message is delivered again.
	ForwardUnknown = "unknown"
	// ForwardFailed: the destination did not take it, or refused it.
	ForwardFailed = "failed"
)

// Forward is one message the processor handed to its target, under the lock
// identified by Key and Fence, and what the target answered for it.
type Forward struct {
	Key       string    `json:"key"`
	Fence     int64     `json:"fence"`
	Send      string    `json:"send"`
	RequestID string    `json:"requestId"`
	At        time.Time `json:"at"`
	Outcome   string    `json:"outcome"`
}

// lockID is one acquisition of a key: its fence is unique to it.
type lockID struct {
	Key   string
	Fence int64
}

// ForwardLog records the target's side of a -target run: every message the
// processor handed to it (observedTarget) and every SendMessageBatch attempt
// the target's SQS client made (observeTargetAttempts). The report needs
// both to explain a key that arrived twice: a second lock after a first
// whose completion was never recorded, or one lock's message sent again by
// the SDK after an attempt whose answer was lost. Safe for concurrent use.
type ForwardLog struct {
	mu       sync.Mutex
	forwards []Forward
	attempts map[lockID]int
}

// NewForwardLog returns an empty log.
func NewForwardLog() *ForwardLog { return &ForwardLog{attempts: map[lockID]int{}} }

func (l *ForwardLog) add(fs []Forward) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forwards = append(l.forwards, fs...)
}

func (l *ForwardLog) attempt(ids []lockID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		l.attempts[id]++
	}
}

// AcceptedKeys is the number of keys the destination has accepted a
// message of so far: the progress line's "forwarded".
func (l *ForwardLog) AcceptedKeys() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := map[string]bool{}
	for _, f := range l.forwards {
		if f.Outcome == ForwardAccepted {
			keys[f.Key] = true
		}
	}
	return len(keys)
}

// ForwardObserved is a snapshot of a ForwardLog.
type ForwardObserved struct {
	Forwards []Forward
	// Attempts counts the SendMessageBatch attempts that carried each lock's
	// message: more than one means the SDK sent it again.
	Attempts map[lockID]int
}

// Snapshot copies the log.
func (l *ForwardLog) Snapshot() ForwardObserved {
	l.mu.Lock()
	defer l.mu.Unlock()
	return ForwardObserved{Forwards: slices.Clone(l.forwards), Attempts: maps.Clone(l.attempts)}
}

// observedTarget is the processor's target with every message's outcome
// recorded, with the invocation that handed it over.
type observedTarget struct {
	sqsonce.Target
	log *ForwardLog
}

// Deliver is the target's, reported message by message.
func (t observedTarget) Deliver(ctx context.Context, msgs []sqsonce.Delivery) []error {
	errs := t.Target.Deliver(ctx, msgs)
	at := time.Now()
	var req string
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		req = lc.AwsRequestID
	}
	fs := make([]Forward, len(msgs))
	for i, m := range msgs {
		fs[i] = Forward{Key: m.Key, Fence: m.Fence, RequestID: req, At: at, Outcome: ForwardUnknown}
		if b, err := ParseBody(m.Record.Body); err == nil {
			fs[i].Send = b.Send
		}
		// An answer missing for a message confirms nothing, as the
		// processor reads it.
		if len(errs) != len(msgs) {
			continue
		}
		switch err := errs[i]; {
		case err == nil:
			fs[i].Outcome = ForwardAccepted
		case errors.Is(err, sqsonce.ErrOutcomeUnknown):
		default:
			fs[i].Outcome = ForwardFailed
		}
	}
	t.log.add(fs)
	return errs
}

// targetInputKey carries a SendMessageBatch's input from the Initialize
// step, which sees it once per call, to the Finalize step, which runs once
// per attempt.
type targetInputKey struct{}

// observeTargetAttempts returns a copy of cfg whose SQS clients report the
// locks (sqs-once-key and sqs-once-fence) of the entries of every
// SendMessageBatch attempt to queueURL, retries included: the only way to
// tell a message the SDK sent twice from one the processor handed over
// twice.
func observeTargetAttempts(cfg aws.Config, queueURL string, report func([]lockID)) aws.Config {
	out := cfg.Copy()
	out.APIOptions = append(out.APIOptions, func(stack *middleware.Stack) error {
		err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc("sqsOnceDemoTargetInput",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if req, ok := in.Parameters.(*sqs.SendMessageBatchInput); ok && aws.ToString(req.QueueUrl) == queueURL {
					ctx = middleware.WithStackValue(ctx, targetInputKey{}, req)
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
		if err != nil {
			return err
		}
		return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("sqsOnceDemoTargetAttempt",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				if req, ok := middleware.GetStackValue(ctx, targetInputKey{}).(*sqs.SendMessageBatchInput); ok {
					report(entryLocks(req))
				}
				return next.HandleFinalize(ctx, in)
			}), middleware.After)
	})
	return out
}

// entryLocks reads the lock of each entry from the attributes the target
// adds.
func entryLocks(req *sqs.SendMessageBatchInput) []lockID {
	ids := make([]lockID, 0, len(req.Entries))
	for _, e := range req.Entries {
		fence, err := strconv.ParseInt(aws.ToString(e.MessageAttributes[targets.AttrFence].StringValue), 10, 64)
		if key := aws.ToString(e.MessageAttributes[targets.AttrKey].StringValue); key != "" && err == nil {
			ids = append(ids, lockID{Key: key, Fence: fence})
		}
	}
	return ids
}
