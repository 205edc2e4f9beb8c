package sqsmsg

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/retrybudget"
)

// BatchSender is the one SQS call SendBatch makes.
type BatchSender interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

var _ BatchSender = (*sqs.Client)(nil)

var (
	// ErrTooLarge: the message alone exceeds MaxMessageBytes, so it was not sent.
	ErrTooLarge = errors.New("sqsmsg: message exceeds the SQS message size limit")
	// ErrNotConfirmed: SQS answered but listed the entry neither as sent nor as
	// failed. It is not counted as sent, because only SQS's word counts as
	// sent; whether it may have been sent is the caller's to weigh (a target
	// treats it as an unknown outcome, keeping the key's lock).
	ErrNotConfirmed = errors.New("sqsmsg: SQS did not confirm the message")
	// ErrNotSent: the context ended before the message's call was made.
	ErrNotSent = errors.New("sqsmsg: not sent")
)

// EntryError is SQS's per-entry failure from a SendMessageBatch result.
type EntryError struct {
	Code        string
	Message     string
	SenderFault bool
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("sqsmsg: SQS rejected the message: %s: %s (sender fault: %t)", e.Code, e.Message, e.SenderFault)
}

// SendBatch sends entries to queueURL in order, in as few SendMessageBatch
// calls as the limits allow (MaxBatchEntries entries and MaxBatchBytes per
// call), one call at a time, and returns the RecordIDs that were NOT
// accepted with the reason: an *EntryError for a per-entry failure, the
// wrapped call error for every entry of a call that failed as a whole (a
// cancelled ctx included), ErrTooLarge, or ErrNotConfirmed. An empty result
// means every entry was accepted. RecordIDs should be unique; for a
// duplicate only the first failure is kept.
func SendBatch(ctx context.Context, api BatchSender, queueURL string, entries []Entry) map[string]error {
	_, failed := SendBatchAccepted(ctx, api, queueURL, entries)
	return failed
}

// SendBatchAccepted is SendBatch that also returns, by RecordID, the
// MessageId SQS gave every entry it accepted: a producer that must trace its
// messages (the demo, against a deployed stack) needs them. A RecordID is in
// accepted or in failed, never both, and every entry is in one of them.
func SendBatchAccepted(ctx context.Context, api BatchSender, queueURL string, entries []Entry) (accepted map[string]string, failed map[string]error) {
	return send(ctx, api, 1, []Batch{{QueueURL: queueURL, Entries: entries}})
}

// Batch is messages for one queue.
type Batch struct {
	QueueURL string
	Entries  []Entry
}

// SendBatches sends every batch as SendBatch does, with the same result,
// but makes up to inFlight SendMessageBatch calls at once across all the
// batches: a thousand messages are a hundred calls, too slow one after the
// other for a Lambda invocation. On a FIFO queue a call waits for the
// earlier calls holding a message group it holds, so each group reaches SQS
// in the order of the entries, as with SendBatch; calls of other groups
// overlap. RecordIDs should be unique across all the batches.
func SendBatches(ctx context.Context, api BatchSender, inFlight int, batches ...Batch) map[string]error {
	_, failed := send(ctx, api, inFlight, batches)
	return failed
}

// call is one SendMessageBatch to make: entries[idx] to queueURL, once the
// calls in after have finished.
type call struct {
	queueURL string
	entries  []Entry
	idx      []int
	after    []chan struct{}
	done     chan struct{}
}

func send(ctx context.Context, api BatchSender, inFlight int, batches []Batch) (map[string]string, map[string]error) {
	r := &results{accepted: map[string]string{}, failed: map[string]error{}}
	var calls []*call
	for _, b := range batches {
		calls = append(calls, plan(b, r)...)
	}
	// A call takes its slot before it waits for the calls it comes after.
	// Slots are taken in plan order and a call only waits for earlier ones,
	// which hold slots already or have finished, so the earliest unfinished
	// call can always run: no deadlock, and inFlight 1 is SendBatch's
	// one-at-a-time order exactly.
	slots := make(chan struct{}, max(inFlight, 1))
	var wg sync.WaitGroup
	for _, c := range calls {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			defer close(c.done)
			for _, d := range c.after {
				<-d
			}
			sendChunk(ctx, api, c.queueURL, c.entries, c.idx, r)
		})
	}
	wg.Wait()
	return r.accepted, r.failed
}

// plan cuts a batch into calls within SQS's limits, keeping the entries'
// order, fails the entries too large to send at all, and on a FIFO queue
// orders each call after the previous call of every group it holds.
func plan(b Batch, r *results) []*call {
	var calls []*call
	last := map[string]*call{} // message group -> its latest call
	var chunk []int            // indexes into b.Entries
	size := 0
	flush := func() {
		if len(chunk) == 0 {
			return
		}
		c := &call{queueURL: b.QueueURL, entries: b.Entries, idx: chunk, done: make(chan struct{})}
		if IsFIFO(b.QueueURL) {
			for _, i := range chunk {
				g := b.Entries[i].GroupID
				if prev, ok := last[g]; ok && prev != c && g != "" {
					c.after = append(c.after, prev.done)
				}
				last[g] = c
			}
		}
		calls = append(calls, c)
		chunk, size = nil, 0
	}
	for i, e := range b.Entries {
		n := e.Size()
		if n > MaxMessageBytes {
			r.fail(e.RecordID, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, n, MaxMessageBytes))
			continue
		}
		if len(chunk) == MaxBatchEntries || size+n > MaxBatchBytes {
			flush()
		}
		chunk = append(chunk, i)
		size += n
	}
	flush()
	return calls
}

// results collects the outcome of every entry, by RecordID, from
// concurrent calls.
type results struct {
	mu       sync.Mutex
	accepted map[string]string
	failed   map[string]error
}

func (r *results) accept(recordID, messageID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, bad := r.failed[recordID]; !bad {
		r.accepted[recordID] = messageID
	}
}

func (r *results) fail(recordID string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.accepted, recordID)
	if _, dup := r.failed[recordID]; !dup {
		r.failed[recordID] = err
	}
}

// sendChunk makes one call. Entry Ids are the entries' indexes: always valid
// batch ids and unique, whatever the RecordIDs look like.
func sendChunk(ctx context.Context, api BatchSender, queueURL string, entries []Entry, chunk []int, r *results) {
	if err := ctx.Err(); err != nil {
		for _, i := range chunk {
			r.fail(entries[i].RecordID, fmt.Errorf("%w: %w", ErrNotSent, err))
		}
		return
	}
	in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: make([]sqstypes.SendMessageBatchRequestEntry, len(chunk))}
	pending := make(map[string]string, len(chunk)) // batch id -> RecordID
	for k, i := range chunk {
		e := entries[i]
		id := strconv.Itoa(i)
		pending[id] = e.RecordID
		in.Entries[k] = sqstypes.SendMessageBatchRequestEntry{
			Id:                      aws.String(id),
			MessageBody:             aws.String(e.Body),
			MessageAttributes:       e.Attributes,
			DelaySeconds:            e.DelaySeconds,
			MessageGroupId:          optional(e.GroupID),
			MessageDeduplicationId:  optional(e.DeduplicationID),
			MessageSystemAttributes: traceHeader(e.TraceHeader),
		}
	}
	// Every send of the suite fits its retries in the time ctx has left:
	// one place for the processor's forwards, the replayer's sends and the
	// sqs target's.
	out, err := api.SendMessageBatch(ctx, in, retrybudget.SQS(ctx))
	var tooLong *sqstypes.BatchRequestTooLong
	if errors.As(err, &tooLong) && len(chunk) > 1 {
		// A region or queue with a lower batch limit than MaxBatchBytes
		// (256 KiB in some partitions) still accepts the entries one by one.
		for _, i := range chunk {
			sendChunk(ctx, api, queueURL, entries, []int{i}, r)
		}
		return
	}
	if err != nil {
		err = fmt.Errorf("sqsmsg: SendMessageBatch to %s: %w", queueURL, err)
		for _, rid := range pending {
			r.fail(rid, err)
		}
		return
	}
	// Failures first: an entry listed as both is not counted as sent.
	for _, f := range out.Failed {
		if rid, ok := pending[aws.ToString(f.Id)]; ok {
			r.fail(rid, &EntryError{Code: aws.ToString(f.Code), Message: aws.ToString(f.Message), SenderFault: f.SenderFault})
			delete(pending, aws.ToString(f.Id))
		}
	}
	for _, s := range out.Successful {
		if rid, ok := pending[aws.ToString(s.Id)]; ok {
			r.accept(rid, aws.ToString(s.MessageId))
			delete(pending, aws.ToString(s.Id))
		}
	}
	for _, rid := range pending {
		r.fail(rid, ErrNotConfirmed)
	}
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// traceHeader is the AWSTraceHeader system attribute carrying h, or nil.
func traceHeader(h string) map[string]sqstypes.MessageSystemAttributeValue {
	if h == "" {
		return nil
	}
	return map[string]sqstypes.MessageSystemAttributeValue{
		SystemAttrTraceHeader: {DataType: aws.String("String"), StringValue: aws.String(h)},
	}
}
