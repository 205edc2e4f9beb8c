package ops

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/sqsmsg"
)

// RedriveOptions says what to move where.
type RedriveOptions struct {
	From, To string // queue URLs
	// Reason moves only messages whose sqs-once-reason is this ("": all).
	Reason string
	// Max moves at most this many messages (0: no limit).
	Max int
	// DryRun receives and classifies, then makes everything visible again:
	// nothing is sent or deleted.
	DryRun bool
	// KeepCopy, a queue URL, receives an unchanged copy of each message
	// before it is moved.
	KeepCopy string
	// Hold is how long a received message stays hidden while it is worked
	// on, and how long a skipped one stays hidden so the run does not see it
	// again (default 5 minutes). Every skipped message is made visible again
	// at the end, interrupted or not.
	Hold time.Duration
	// Progress, when set, is called after each batch with the counts so far.
	Progress func(RedriveCounts)
}

// RedriveCounts are a redrive's counts so far.
type RedriveCounts struct {
	// Moved are the messages the destination accepted and the source no
	// longer holds (with DryRun: would move).
	Moved int `json:"moved"`
	// Copies are further copies of an original message already moved in
	// this run (same sqs-dlq-original-message-id), deleted from the source
	// without being sent again.
	Copies int `json:"copies"`
	// Skipped are messages whose reason did not match --reason; left in
	// the source.
	Skipped int `json:"skipped"`
	// Failed are messages that could not be moved: still in the source
	// only. Each has its reason in the summary's Failures.
	Failed int `json:"failed"`
	// NotDeleted are messages moved (counted in Moved or Copies) whose
	// delete from the source failed: in both queues now. Each is in
	// Failures too.
	NotDeleted int `json:"notDeleted"`
}

// Handled is the number of messages the run has dealt with.
func (c RedriveCounts) Handled() int { return c.Moved + c.Copies + c.Skipped + c.Failed }

// RedriveFailure is one message that was not moved, or not cleanly.
type RedriveFailure struct {
	MessageID  string `json:"messageId"`
	OriginalID string `json:"originalMessageId,omitempty"`
	// Where is "keep-copy", "send" (still in the source only) or "delete"
	// (in the destination and still in the source).
	Where string `json:"where"`
	Error string `json:"error"`
}

// RedriveSummary is what a redrive did.
type RedriveSummary struct {
	RedriveCounts
	From        string           `json:"from"`
	To          string           `json:"to"`
	KeepCopy    string           `json:"keepCopy,omitempty"`
	Reason      string           `json:"reason,omitempty"`
	DryRun      bool             `json:"dryRun"`
	Interrupted bool             `json:"interrupted"`
	Failures    []RedriveFailure `json:"failures,omitempty"`
	// Error is what stopped the run early, if anything did.
	Error string `json:"error,omitempty"`
}

// identity is what makes two messages copies of one original: the
// sqs-dlq-original-message-id the replayer and the processor stamp on every
// forward and replay (byte for byte, so both copies of a retried send carry
// the same), else the message's own id (no two such messages are taken for
// copies, even with equal bodies: a producer may send the same body twice
// on purpose).
func identity(m Message) string {
	if m.OriginalID != "" {
		return "original:" + m.OriginalID
	}
	return "message:" + m.MessageID
}

// Redrive moves messages from opt.From to opt.To, batch by batch: receive up
// to ten (hidden for opt.Hold), send the ones to move (the replay counter
// sqs-dlq-replay-nb removed, everything else byte for byte), and delete from
// the source exactly those the destination accepted. A message is never
// deleted before its destination (and the keep-copy queue) has accepted it.
//
// Interrupting (cancelling ctx) stops before the next batch: the batch in
// flight is finished on a context of its own, so an interrupt never leaves a
// message sent but not deleted. What remains (README, "Operations") is a
// process killed between the send and the delete, or a delete that keeps
// failing: that message is then in both queues, and a re-run moves it again;
// both copies carry the same sqs-dlq-original-message-id, which the processor
// keys on, and a FIFO destination drops the second within its five-minute
// deduplication interval (the deduplication id is derived from the source
// message's id).
func (q *Queues) Redrive(ctx context.Context, opt RedriveOptions) (RedriveSummary, error) {
	sum := RedriveSummary{From: opt.From, To: opt.To, KeepCopy: opt.KeepCopy, Reason: opt.Reason, DryRun: opt.DryRun}
	if opt.From == "" || opt.To == "" || opt.From == opt.To || (opt.KeepCopy != "" && (opt.KeepCopy == opt.From || opt.KeepCopy == opt.To)) {
		return sum, fmt.Errorf("%w: redrive needs a source, a destination and a keep-copy queue that all differ", ErrUsage)
	}
	if opt.Max < 0 {
		return sum, fmt.Errorf("%w: --max must be 0 (no limit) or more", ErrUsage)
	}
	if opt.Hold <= 0 {
		opt.Hold = 5 * time.Minute
	}
	r := &redrive{q: q, opt: opt, sum: &sum, moved: map[string]bool{}, seen: map[string]bool{}}
	var stop error
	stale := 0
	for {
		if ctx.Err() != nil {
			sum.Interrupted = true
			break
		}
		if opt.Max > 0 && sum.Moved >= opt.Max {
			break
		}
		got, err := q.receive(ctx, opt.From, 10, opt.Hold)
		if err != nil {
			if ctx.Err() != nil {
				sum.Interrupted = true
			} else {
				stop = err
			}
			break
		}
		if len(got) == 0 {
			break
		}
		// The step in flight ends on its own context: an interrupt lands
		// between two batches, never between a send and its delete.
		step, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		fresh := r.batch(step, got)
		cancel()
		if opt.Progress != nil {
			opt.Progress(sum.RedriveCounts)
		}
		// Only messages seen before (their hold ended on a long run): the
		// queue has shown everything it will.
		if fresh == 0 {
			if stale++; stale >= 3 {
				break
			}
		} else {
			stale = 0
		}
	}
	if err := q.showAgain(ctx, opt.From, r.held); err != nil && stop == nil {
		stop = err
	}
	if stop != nil {
		sum.Error = stop.Error()
		return sum, stop
	}
	if sum.Failed > 0 || sum.NotDeleted > 0 {
		return sum, fmt.Errorf("redrive: %s not moved, %s moved but not deleted from the source (listed in the summary): %w",
			count(sum.Failed, "message", "messages"), count(sum.NotDeleted, "message", "messages"), ErrIncomplete)
	}
	if sum.Interrupted {
		return sum, fmt.Errorf("redrive interrupted after moving %s: re-run it to move the rest: %w", count(sum.Moved, "message", "messages"), ErrIncomplete)
	}
	return sum, nil
}

type redrive struct {
	q     *Queues
	opt   RedriveOptions
	sum   *RedriveSummary
	moved map[string]bool // identities moved in this run
	seen  map[string]bool // source message ids dealt with in this run
	held  []string        // receipt handles to make visible again at the end
}

func (r *redrive) fail(m Message, where string, err error) {
	r.sum.Failed++
	r.sum.Failures = append(r.sum.Failures, RedriveFailure{MessageID: m.MessageID, OriginalID: m.OriginalID, Where: where, Error: err.Error()})
}

// batch deals with one receive's messages and returns how many were new to
// this run.
func (r *redrive) batch(ctx context.Context, got []sqstypes.Message) int {
	var send []Message
	copiesOf := map[string][]Message{} // identity -> copies waiting on its send
	var deletions []Message
	fresh := 0
	for _, raw := range got {
		m := viewMessage(raw, false)
		if r.seen[m.MessageID] {
			r.held = append(r.held, m.receiptHandle)
			continue
		}
		r.seen[m.MessageID] = true
		fresh++
		id := identity(m)
		switch {
		case r.opt.Reason != "" && m.Reason != r.opt.Reason:
			r.sum.Skipped++
			r.held = append(r.held, m.receiptHandle)
		case r.moved[id]:
			r.sum.Copies++
			deletions = append(deletions, m)
		case copiesOf[id] != nil:
			copiesOf[id] = append(copiesOf[id], m)
		case r.opt.Max > 0 && r.sum.Moved+len(send) >= r.opt.Max:
			// Over the limit: left for another run.
			r.held = append(r.held, m.receiptHandle)
			delete(r.seen, m.MessageID)
		default:
			send = append(send, m)
			copiesOf[id] = []Message{}
		}
	}
	if r.opt.DryRun {
		for _, m := range send {
			r.moved[identity(m)] = true
			r.sum.Moved++
			r.sum.Copies += len(copiesOf[identity(m)])
			r.held = append(r.held, m.receiptHandle)
			for _, c := range copiesOf[identity(m)] {
				r.held = append(r.held, c.receiptHandle)
			}
		}
		for _, m := range deletions {
			r.held = append(r.held, m.receiptHandle)
		}
		return fresh
	}
	giveUp := func(m Message, where string, err error) {
		r.fail(m, where, err)
		// Its copies stay too: they are the same message, to be moved by a
		// later run once the cause is fixed.
		for _, c := range copiesOf[identity(m)] {
			r.held = append(r.held, c.receiptHandle)
		}
		r.held = append(r.held, m.receiptHandle)
	}
	if r.opt.KeepCopy != "" {
		failed := r.sendTo(ctx, r.opt.KeepCopy, send, false)
		send = slices.DeleteFunc(send, func(m Message) bool {
			if err := failed[m.MessageID]; err != nil {
				giveUp(m, "keep-copy", err)
				return true
			}
			return false
		})
	}
	failed := r.sendTo(ctx, r.opt.To, send, true)
	var movedNow []Message
	for _, m := range send {
		if err := failed[m.MessageID]; err != nil {
			giveUp(m, "send", err)
			continue
		}
		r.moved[identity(m)] = true
		movedNow = append(movedNow, m)
		deletions = append(deletions, m)
		deletions = append(deletions, copiesOf[identity(m)]...)
		r.sum.Copies += len(copiesOf[identity(m)])
	}
	r.sum.Moved += len(movedNow)
	for _, f := range r.delete(ctx, deletions) {
		// Sent already: counted moved, and not deleted.
		r.sum.NotDeleted++
		r.sum.Failures = append(r.sum.Failures, f)
	}
	return fresh
}

// sendTo sends the messages to queueURL and returns the failures by source
// message id. redrive resets the replay counter, so the replayer gives the
// message its full MAX_ATTEMPTS again; every other attribute and the body
// are copied as received.
func (r *redrive) sendTo(ctx context.Context, queueURL string, msgs []Message, redrive bool) map[string]error {
	if len(msgs) == 0 {
		return nil
	}
	entries := make([]sqsmsg.Entry, 0, len(msgs))
	for _, m := range msgs {
		attrs := make(map[string]sqstypes.MessageAttributeValue, len(m.raw.MessageAttributes))
		for name, a := range m.raw.MessageAttributes {
			if redrive && name == sqsmsg.AttrReplayCount {
				continue
			}
			attrs[name] = sqstypes.MessageAttributeValue{
				DataType: a.DataType, StringValue: a.StringValue, BinaryValue: slices.Clone(a.BinaryValue),
			}
		}
		e := sqsmsg.Entry{
			RecordID: m.MessageID, Body: aws.ToString(m.raw.Body), Attributes: attrs,
			TraceHeader: m.raw.Attributes[sqsmsg.SystemAttrTraceHeader],
		}
		if sqsmsg.IsFIFO(queueURL) {
			e.GroupID = m.GroupID
			if e.GroupID == "" {
				e.GroupID = m.MessageID
			}
			// The source message's id: a re-run's re-send of a message
			// whose delete was lost is dropped by the FIFO queue.
			e.DeduplicationID = sqsmsg.DeduplicationID("sqs-once redrive", queueURL, m.MessageID)
		}
		entries = append(entries, e)
	}
	_, failed := sqsmsg.SendBatchAccepted(ctx, r.q.SQS, queueURL, entries)
	return failed
}

// delete removes messages from the source, ten per call, and returns the
// ones it could not.
func (r *redrive) delete(ctx context.Context, msgs []Message) []RedriveFailure {
	var out []RedriveFailure
	for start := 0; start < len(msgs); start += 10 {
		chunk := msgs[start:min(start+10, len(msgs))]
		entries := make([]sqstypes.DeleteMessageBatchRequestEntry, len(chunk))
		for i, m := range chunk {
			entries[i] = sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(m.receiptHandle)}
		}
		res, err := r.q.SQS.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(r.opt.From), Entries: entries})
		errs := map[int]string{}
		if err != nil {
			for i := range chunk {
				errs[i] = awsError("delete", err).Error()
			}
		} else {
			for _, f := range res.Failed {
				i, _ := strconv.Atoi(aws.ToString(f.Id))
				errs[i] = aws.ToString(f.Code) + ": " + aws.ToString(f.Message)
			}
		}
		for _, i := range slices.Sorted(maps.Keys(errs)) {
			if i < 0 || i >= len(chunk) {
				continue
			}
			m := chunk[i]
			// Visible again at the end, not hidden for the rest of the hold:
			// a re-run can then finish the move at once (and a FIFO
			// destination drops its second send), and a FIFO source's group
			// is not held up.
			r.held = append(r.held, m.receiptHandle)
			out = append(out, RedriveFailure{MessageID: m.MessageID, OriginalID: m.OriginalID, Where: "delete",
				Error: "in the destination, but still in the source (" + errs[i] + "): delete it from the source by hand, or a re-run moves it again"})
		}
	}
	return out
}
