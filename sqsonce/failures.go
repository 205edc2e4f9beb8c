package sqsonce

import (
	"context"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/jitter"
	"github.com/sqs-once/sqs-once/internal/retrybudget"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
)

// The attributes of a message on the operator queue: AttrReason holds its
// Reason; AttrOriginalMessageID the id of the message as first sent, which
// its copies (replays, a retried send) share.
const (
	AttrReason            = sqsmsg.AttrReason
	AttrOriginalMessageID = sqsmsg.AttrOriginalMessageID
)

// maxVisibility is the longest failure backoff. SQS refuses a visibility
// timeout reaching past 12 hours from the receive; the receive happened at
// most a Lambda timeout (15 min) plus a batching window (5 min) ago.
const maxVisibility = 12*time.Hour - 20*time.Minute

// inFlightLimit is how long SQS lets a message stay in flight, and
// visibilitySkew the margin kept from it for the clocks of Lambda and SQS.
const (
	inFlightLimit  = 12 * time.Hour
	visibilitySkew = time.Minute
)

// visibilityLeft is the longest visibility timeout SQS still accepts for msg
// at now: 12 hours counted from its first receive (conservatively: SQS counts
// from the receive of this receipt handle, which is no earlier), less a
// margin. A record without its first-receive time gets maxVisibility.
func visibilityLeft(msg events.SQSMessage, now time.Time) time.Duration {
	ms, err := strconv.ParseInt(msg.Attributes["ApproximateFirstReceiveTimestamp"], 10, 64)
	if err != nil {
		return maxVisibility
	}
	return min(maxVisibility, inFlightLimit-visibilitySkew-now.Sub(time.UnixMilli(ms)))
}

// failureBackoff is the visibility delay of a failed record. Equal jitter,
// not full: the point is to slow a poison message down, and full jitter
// could make it visible again at once.
func failureBackoff(base time.Duration) jitter.Policy {
	return jitter.Policy{Base: base, Rate: 2, Cap: maxVisibility, Strategy: jitter.Equal}
}

// forwardsInFlight is how many SendMessageBatch calls to the operator queue
// run at once.
const forwardsInFlight = 10

// forwardPermanent sends the records bound for the operator queue (Kind
// KindForwardedToOperator, as judge left it) in batches. A record the queue
// did not accept is retried instead: it is deleted only once the operator
// queue holds it.
func (p *Processor) forwardPermanent(ctx context.Context, records []events.SQSMessage, outcomes []outcome) {
	var entries []sqsmsg.Entry
	index := map[string]int{}
	for i, o := range outcomes {
		if o.Kind != KindForwardedToOperator {
			continue
		}
		entries = append(entries, sqsmsg.ForwardEntry(records[i], p.cfg.OperatorQueueURL, string(o.Reason)))
		index[records[i].MessageId] = i
	}
	if len(entries) == 0 {
		return
	}
	// Ten calls at once: the forwards run in the invocation's reserve, which
	// a large batch's sends one after another could outlast.
	failed := sqsmsg.SendBatches(ctx, p.sqs, forwardsInFlight, sqsmsg.Batch{QueueURL: p.cfg.OperatorQueueURL, Entries: entries})
	for _, e := range entries {
		i := index[e.RecordID]
		if err, ok := failed[e.RecordID]; ok {
			p.log.ErrorContext(ctx, "operator queue did not accept the message; retried later", "messageId", e.RecordID, "error", err)
			outcomes[i].Kind, outcomes[i].Reason = KindFailed, ReasonForwardFailed
			continue
		}
		p.log.InfoContext(ctx, "forwarded to the operator queue", "messageId", e.RecordID, "reason", string(outcomes[i].Reason))
	}
}

// delayRetries sets the visibility of the records reported failed, in one
// ChangeMessageVisibilityBatch per ten, and returns how many changes SQS
// confirmed of each kind:
//
//   - a record refused as in progress is hidden until the lock that refused
//     it can be taken over, plus jitter (inProgressDelay): its next receive
//     is then the one that can take a dead holder's lock, where the queue's
//     visibility timeout would bring it back too early (a wasted receive,
//     and with maxReceiveCount of them a healthy message dead-lettered) or
//     too late;
//   - with FailureBackoffBase, any other failure backs off for a time that
//     grows with its receive count. A record that failed on the last
//     receive the consumed queue's redrive policy allows is made visible at
//     once instead (dueForDLQ): its next receive moves it to the
//     dead-letter queue, and the longest backoff of its life would only
//     have kept it from there.
//
// A failure here only costs the delay: the records are retried after the
// queue's own visibility timeout. Without an SQS client (no AWS
// configuration: a test on sqsoncetest's store) nothing is changed.
func (p *Processor) delayRetries(ctx context.Context, records []events.SQSMessage, outcomes []outcome) {
	if p.sqs == nil {
		return
	}
	var failed []events.SQSMessage
	var kinds []*outcome
	for i := range outcomes {
		if o := &outcomes[i]; o.retried() && (!o.hideUntil.IsZero() || p.cfg.FailureBackoffBase > 0) {
			failed = append(failed, records[i])
			kinds = append(kinds, o)
		}
	}
	now := p.now()
	offset := 0
	for chunk := range chunks(failed, sqsmsg.MaxBatchEntries) {
		kind := kinds[offset : offset+len(chunk)]
		offset += len(chunk)
		queueURL, err := sqsmsg.QueueURLFromARN(chunk[0].EventSourceARN)
		if err != nil {
			p.log.WarnContext(ctx, "visibility of failed records not changed", "error", err)
			continue
		}
		in := &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(queueURL)}
		for i, msg := range chunk {
			var delay time.Duration
			if !kind[i].hideUntil.IsZero() {
				delay = inProgressDelay(kind[i].hideUntil.Sub(now), p.rand())
			} else {
				receives, _ := strconv.Atoi(msg.Attributes["ApproximateReceiveCount"])
				delay = jitter.RoundUp(p.backoff.Delay(max(receives, 1), p.rand()), time.Second)
				if p.dueForDLQ(msg, receives) {
					delay = 0
				}
			}
			if left := visibilityLeft(msg, now).Truncate(time.Second); delay > left {
				if left <= 0 {
					p.log.WarnContext(ctx, "visibility not changed: the message has been in flight for nearly SQS's 12 hours; it retries after the visibility timeout",
						"messageId", msg.MessageId, "firstReceive", msg.Attributes["ApproximateFirstReceiveTimestamp"])
					continue
				}
				delay = left
			}
			in.Entries = append(in.Entries, sqstypes.ChangeMessageVisibilityBatchRequestEntry{
				Id:                aws.String(strconv.Itoa(i)),
				ReceiptHandle:     aws.String(msg.ReceiptHandle),
				VisibilityTimeout: int32(delay / time.Second),
			})
		}
		if len(in.Entries) == 0 {
			continue
		}
		out, err := p.sqs.ChangeMessageVisibilityBatch(ctx, in, retrybudget.SQS(ctx))
		if err != nil {
			p.log.WarnContext(ctx, "visibility of failed records not changed; they retry after the visibility timeout", "error", err, "records", len(chunk))
			continue
		}
		for _, f := range out.Failed {
			i, _ := strconv.Atoi(aws.ToString(f.Id))
			p.log.WarnContext(ctx, "visibility of a failed record not changed", "messageId", chunk[i].MessageId,
				"code", aws.ToString(f.Code), "error", aws.ToString(f.Message))
		}
		// Only SQS's word counts: an entry it lists as neither failed nor
		// successful was not confirmed.
		for _, ok := range out.Successful {
			i, _ := strconv.Atoi(aws.ToString(ok.Id))
			for _, e := range in.Entries {
				if aws.ToString(e.Id) != aws.ToString(ok.Id) {
					continue
				}
				switch {
				case !kind[i].hideUntil.IsZero():
					p.log.InfoContext(ctx, "in-progress record hidden until the lock can be taken over", "messageId", chunk[i].MessageId,
						"visibilityTimeout", e.VisibilityTimeout, "lockExpiresAt", kind[i].hideUntil)
					kind[i].InProgressHidden = true
					continue
				case e.VisibilityTimeout == 0:
					p.log.InfoContext(ctx, "failed record left visible: it failed its last receive, and the next moves it to the dead-letter queue",
						"messageId", chunk[i].MessageId, "receiveCount", chunk[i].Attributes["ApproximateReceiveCount"])
				default:
					p.log.InfoContext(ctx, "failed record delayed", "messageId", chunk[i].MessageId, "visibilityTimeout", e.VisibilityTimeout)
				}
				kind[i].BackoffApplied = true
			}
		}
	}
}

// inProgressDelay is how long to hide a record refused by a lock that can
// be taken over in remaining (negative: already), for the uniform draw r in
// [0, 1): past the expiry by a second (a lock is taken over only once it is
// strictly past, and hosts' clocks differ), plus jitter of up to a tenth of
// the wait (between 1 s and a minute), so that copies refused together do
// not all come back in the same instant. Whole seconds, rounded up, as SQS
// takes them.
func inProgressDelay(remaining time.Duration, r float64) time.Duration {
	remaining = max(remaining, 0)
	// Full jitter under a fixed ceiling (Rate 1): the spread is the same
	// whatever the receive, as the wait it pads is known.
	spread := min(max(time.Second, remaining/10), time.Minute)
	j := jitter.Policy{Base: spread, Rate: 1, Cap: spread, Strategy: jitter.Full}.Delay(0, r)
	return jitter.RoundUp(remaining+time.Second+j, time.Second)
}

// dueForDLQ reports whether msg failed on the last receive the redrive
// policy of the queue named by QueueURL allows, as read at the first event.
// A policy changed since then costs no message: a lower maxReceiveCount
// dead-letters the record before this applies, a higher one retries it
// without the backoff.
func (p *Processor) dueForDLQ(msg events.SQSMessage, receives int) bool {
	limit := p.maxReceives.Load()
	return limit > 0 && int64(receives) >= limit && sqsmsg.SameQueue(p.cfg.QueueURL, msg.EventSourceARN)
}

// chunks yields consecutive records of one queue, at most n at a time. All
// records of a Lambda event come from one queue, but the check keeps a
// ChangeMessageVisibilityBatch from ever mixing two.
func chunks(records []events.SQSMessage, n int) func(func([]events.SQSMessage) bool) {
	return func(yield func([]events.SQSMessage) bool) {
		for start := 0; start < len(records); {
			end := start + 1
			for end < len(records) && end-start < n && records[end].EventSourceARN == records[start].EventSourceARN {
				end++
			}
			if !yield(records[start:end]) {
				return
			}
			start = end
		}
	}
}
