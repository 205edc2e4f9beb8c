package replay

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/jitter"
	"github.com/sqs-once/sqs-once/internal/retrybudget"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
)

// Reasons in the sqs-once-reason attribute of operator-queue messages.
const (
	ReasonMaxAttempts    = "max-attempts"
	ReasonInvalidCounter = "invalid-counter"
	ReasonAttributeLimit = "attribute-limit"
	ReasonMissingGroupID = "missing-group-id"
	// ReasonExpired: the message would be older than MAX_MESSAGE_AGE when
	// its next replay became visible.
	ReasonExpired = "expired"
)

// Handler is the Lambda handler.
type Handler struct {
	cfg     Config
	api     sqsmsg.BatchSender
	vis     VisibilityChanger // nil: FIFO holds last the DLQ's visibility timeout
	rand    func() float64
	now     func() time.Time
	log     *slog.Logger
	metrics io.Writer // nil: no metrics
	// function is the metrics' FunctionName dimension.
	function string
}

// VisibilityChanger is the call that keeps a dead letter hidden in a FIFO
// DLQ for its backoff (see Handle). An *sqs.Client is one.
type VisibilityChanger interface {
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// NewHandler builds the handler and its SQS client, whose retries back off
// at most retrybudget.MaxBackoff and end when the call's time is up, and
// never repeat a send SQS answered (retrybudget.SafeRequestBody).
func NewHandler(cfg Config, awsCfg aws.Config) *Handler {
	return NewHandlerWith(cfg, awsCfg, Deps{})
}

// NewHandlerWith is New with the SQS client NewHandler builds from awsCfg in
// d.SQS; d gives the rest (Metrics, Logger, ...).
func NewHandlerWith(cfg Config, awsCfg aws.Config, d Deps) *Handler {
	d.SQS = sqs.NewFromConfig(awsCfg, func(o *sqs.Options) {
		o.Retryer = retrybudget.Client(o.Retryer)
		// Without it, a replay SQS accepted is sent again when the
		// function's CPU lags behind the answer (see SafeRequestBody).
		o.APIOptions = append(o.APIOptions, retrybudget.SafeRequestBody)
	})
	return New(cfg, d)
}

// Deps are the handler's collaborators; a nil random source, clock or
// logger means math/rand/v2, time.Now and slog.Default().
type Deps struct {
	// SQS sends the replays and forwards. If it is also a VisibilityChanger
	// (an *sqs.Client is), it holds FIFO dead letters for their backoff;
	// otherwise a held record comes back after the DLQ's visibility timeout
	// and is held again until its time has come.
	SQS sqsmsg.BatchSender
	// Rand returns a uniform value in [0, 1) for the backoff jitter.
	Rand func() float64
	// Now is the clock the message age and the FIFO backoff are measured by.
	Now    func() time.Time
	Logger *slog.Logger
	// Metrics, when set, receives the invocation's CloudWatch Embedded
	// Metric Format lines at the end of each Handle (see metrics.go); nil
	// writes none. The Lambda function passes its standard output.
	Metrics io.Writer
	// FunctionName is the metrics' FunctionName dimension. Empty: the
	// AWS_LAMBDA_FUNCTION_NAME Lambda sets, else "dlq-replayer".
	FunctionName string
}

// New builds the handler from explicit collaborators.
func New(cfg Config, d Deps) *Handler {
	if d.Rand == nil {
		d.Rand = rand.Float64
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	h := &Handler{cfg: cfg, api: d.SQS, rand: d.Rand, now: d.Now, log: d.Logger, metrics: d.Metrics,
		function: cmp.Or(d.FunctionName, os.Getenv("AWS_LAMBDA_FUNCTION_NAME"), "dlq-replayer")}
	if v, ok := d.SQS.(VisibilityChanger); ok {
		h.vis = v
	}
	return h
}

// action is what the handler does with a record.
type action int

const (
	// send: the entry goes to queue; the record is deleted once it is accepted.
	send action = iota
	// hold: FIFO only. The replay's backoff has not passed: the record stays
	// hidden in the DLQ for holdFor and is reported failed.
	hold
	// behind: FIFO only. An earlier record of its message group in this
	// batch is held; it is reported failed unsent, so the group keeps its
	// order.
	behind
)

// decision is where one record goes and as what.
type decision struct {
	action action
	entry  sqsmsg.Entry
	queue  string
	n      int    // the replay this would be; 0 when the counter is invalid
	reason string // set for the operator queue
	// delay is the backoff drawn for a replay sent to the main queue: its
	// DelaySeconds on a standard queue, the time waited out in the DLQ on a
	// FIFO one.
	delay time.Duration
	// holdFor is how long a held record stays hidden in the DLQ.
	holdFor time.Duration
	// firstSent is the message's first enqueue (zero when unknown), and
	// unstamped says it could not be stamped for lack of room.
	firstSent time.Time
	unstamped bool
	rec       events.SQSMessage
}

// SendsInFlight is how many SendMessageBatch calls one invocation makes at
// once. A batch of 1000 dead letters is over a hundred calls: one after the
// other they could outlast the 30 s timeout, ten at a time they take about
// twelve calls' time. A standard queue takes that from every invocation; a
// FIFO queue's call quota may throttle many invocations at once, and the
// SDK then retries. The template bounds ReplayerBatchSize by this figure
// (see TestTemplateBatchSizeFitsTheTimeout in local/templatetest).
const SendsInFlight = 10

// Handle replays or forwards every record, in one SendMessageBatch per 10
// messages per destination, up to SendsInFlight calls at once, and reports
// the records not accepted as batch item failures so they stay in the DLQ.
// Per-record problems never make it return an error.
//
// A FIFO main queue refuses per-message delays, so there the backoff is
// served in the (FIFO) DLQ instead: a record whose backoff has not passed is
// hidden there with ChangeMessageVisibility for the time left and reported
// failed, and the later records of its group in the batch are reported
// failed unsent. A message in flight holds up its group in a FIFO queue, so
// the group waits behind it in order; when it comes back, its time has come
// and it is sent with no delay. Whether the time has come is computed from
// the clock, not from counting visits, so a lost visibility change or a
// failed send only makes the record come back sooner, to be held again.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	now := h.now()
	fifo := sqsmsg.IsFIFO(h.cfg.MainQueueURL)
	decisions := make([]decision, len(ev.Records))
	byQueue := map[string][]sqsmsg.Entry{}
	var holds []decision
	waiting := map[string]bool{} // FIFO groups with a held record in this batch
	for i, rec := range ev.Records {
		d := h.decide(rec, h.rand(), now)
		group := rec.Attributes["MessageGroupId"]
		if fifo && group != "" && waiting[group] {
			d = decision{action: behind, entry: sqsmsg.Entry{RecordID: rec.MessageId}, n: d.n, rec: rec}
		}
		decisions[i] = d
		switch d.action {
		case send:
			byQueue[d.queue] = append(byQueue[d.queue], d.entry)
		case hold:
			holds = append(holds, d)
			waiting[group] = true
		}
	}
	// The calls end before the response share of the invocation's reserve:
	// a call still running at the timeout would cost the whole response.
	sendCtx, cancel := sendContext(ctx)
	defer cancel()
	var failed map[string]error
	var holdErrs map[string]error
	var wg sync.WaitGroup
	wg.Go(func() { holdErrs = h.hold(sendCtx, holds) })
	failed = sqsmsg.SendBatches(sendCtx, h.api, SendsInFlight,
		sqsmsg.Batch{QueueURL: h.cfg.MainQueueURL, Entries: byQueue[h.cfg.MainQueueURL]},
		sqsmsg.Batch{QueueURL: h.cfg.OperatorQueueURL, Entries: byQueue[h.cfg.OperatorQueueURL]})
	wg.Wait()
	var resp events.SQSEventResponse
	tally := newTally(h.function)
	for _, d := range decisions {
		err := failed[d.entry.RecordID]
		if d.action == hold {
			err = holdErrs[d.entry.RecordID]
		}
		h.logDecision(ctx, d, err)
		tally.add(d, err)
		if err != nil || d.action != send {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: d.entry.RecordID})
		}
	}
	h.emitMetrics(ctx, tally)
	return resp, nil
}

// hold hides the held records in their DLQ for their time left, in
// ChangeMessageVisibilityBatch calls of up to 10, and returns why a record
// could not be hidden. Such a record is still reported failed: it comes
// back after the DLQ's visibility timeout and is held again, never sent
// early and never lost.
func (h *Handler) hold(ctx context.Context, holds []decision) map[string]error {
	errs := map[string]error{}
	if len(holds) == 0 {
		return errs
	}
	if h.vis == nil {
		for _, d := range holds {
			errs[d.entry.RecordID] = errNoVisibilityAPI
		}
		return errs
	}
	var mu sync.Mutex
	fail := func(id string, err error) {
		mu.Lock()
		defer mu.Unlock()
		errs[id] = err
	}
	slots := make(chan struct{}, SendsInFlight)
	var wg sync.WaitGroup
	for start := 0; start < len(holds); {
		end := start + 1
		for end < len(holds) && end-start < sqsmsg.MaxBatchEntries && holds[end].rec.EventSourceARN == holds[start].rec.EventSourceARN {
			end++
		}
		chunk := holds[start:end]
		start = end
		queueURL, err := sqsmsg.QueueURLFromARN(chunk[0].rec.EventSourceARN)
		if err != nil {
			err = fmt.Errorf("replay: eventSourceARN: %w; the record is held for the DLQ's visibility timeout", err)
			for _, d := range chunk {
				fail(d.entry.RecordID, err)
			}
			continue
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			in := &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(queueURL)}
			for i, d := range chunk {
				in.Entries = append(in.Entries, sqstypes.ChangeMessageVisibilityBatchRequestEntry{
					Id:                aws.String(strconv.Itoa(i)),
					ReceiptHandle:     aws.String(d.rec.ReceiptHandle),
					VisibilityTimeout: int32(d.holdFor / time.Second),
				})
			}
			out, err := h.vis.ChangeMessageVisibilityBatch(ctx, in, retrybudget.SQS(ctx))
			if err != nil {
				for _, d := range chunk {
					fail(d.entry.RecordID, fmt.Errorf("replay: hide the held record in %s: %w", queueURL, err))
				}
				return
			}
			// Only SQS's word that it changed counts; an entry listed as
			// failed or not at all is not hidden.
			why := map[string]error{}
			for i := range chunk {
				why[strconv.Itoa(i)] = errHoldNotConfirmed
			}
			for _, f := range out.Failed {
				if _, ok := why[aws.ToString(f.Id)]; ok {
					why[aws.ToString(f.Id)] = fmt.Errorf("replay: hide the held record: %s: %s", aws.ToString(f.Code), aws.ToString(f.Message))
				}
			}
			for _, ok := range out.Successful {
				if id := aws.ToString(ok.Id); why[id] == errHoldNotConfirmed { // failures first
					delete(why, id)
				}
			}
			for i, d := range chunk {
				if err, ok := why[strconv.Itoa(i)]; ok {
					fail(d.entry.RecordID, err)
				}
			}
		})
	}
	wg.Wait()
	return errs
}

var (
	errNoVisibilityAPI  = errors.New("replay: no ChangeMessageVisibilityBatch client; the record is held for the DLQ's visibility timeout")
	errHoldNotConfirmed = errors.New("replay: SQS did not confirm the visibility change; the record is held for the DLQ's visibility timeout")
)

func sendContext(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	share := retrybudget.ResponseShare(retrybudget.Reserve(time.Until(deadline)))
	return context.WithDeadline(ctx, deadline.Add(-share))
}

// decide is where rec goes, given the jitter draw r (standard main queue)
// and the time now. It makes no call.
func (h *Handler) decide(rec events.SQSMessage, r float64, now time.Time) decision {
	prev, ok := replayCount(rec.MessageAttributes)
	n := prev + 1
	first := firstSent(rec)
	fifo := sqsmsg.IsFIFO(h.cfg.MainQueueURL)
	switch {
	case !ok:
		return h.toOperator(rec, 0, ReasonInvalidCounter, first)
	case n > h.cfg.MaxAttempts:
		return h.toOperator(rec, n, ReasonMaxAttempts, first)
	case fifo && rec.Attributes["MessageGroupId"] == "":
		return h.toOperator(rec, n, ReasonMissingGroupID, first)
	}
	// delay is the backoff drawn; wait is what is left of it: until the
	// replay is visible.
	var delay, wait time.Duration
	if fifo {
		delay = h.fifoDelay(rec, n)
		wait = HoldFor(sentTimestamp(rec), delay, now)
	} else {
		delay = roundSeconds(h.cfg.Backoff.Delay(n, r))
		wait = delay
	}
	if Expired(first.at, h.cfg.MaxMessageAge, now.Add(wait)) {
		return h.toOperator(rec, n, ReasonExpired, first)
	}
	if wait > 0 && fifo {
		return decision{action: hold, entry: sqsmsg.Entry{RecordID: rec.MessageId}, n: n, holdFor: wait, firstSent: first.at, rec: rec}
	}
	e := sqsmsg.FromRecord(rec)
	// An original id the message already carries, String or Binary, is
	// kept as it is: the processor keys on it.
	orig, ok := sqsmsg.OriginalMessageID(rec)
	if !ok {
		orig = rec.MessageId
		if !e.SetAttribute(sqsmsg.AttrOriginalMessageID, sqsmsg.String(orig)) {
			return h.toOperator(rec, n, ReasonAttributeLimit, first)
		}
	}
	if !e.SetAttribute(sqsmsg.AttrReplayCount, counter(e, n)) {
		return h.toOperator(rec, n, ReasonAttributeLimit, first)
	}
	// The stamp is the one attribute a replay can do without: a message with
	// no room for it is replayed unstamped rather than refused, its age then
	// counted from the DLQ record's SentTimestamp each time (a lower bound),
	// and MAX_ATTEMPTS still ends its replays.
	unstamped := !stamp(&e, first)
	e.TraceHeader = rec.Attributes[sqsmsg.SystemAttrTraceHeader]
	if fifo {
		// A fresh id per replay keeps the replay from being swallowed as a
		// duplicate of the original or of an earlier replay; the DLQ
		// record's own id makes it fresh even when an operator reset the
		// counter, while a retry of the same record (Lambda's, or the SDK's
		// after a lost answer) sends the same id and is deduplicated.
		e.DeduplicationID = sqsmsg.DeduplicationID("replay", orig, strconv.Itoa(n), rec.MessageId)
	} else {
		e.DelaySeconds = int32(wait / time.Second)
	}
	return decision{entry: e, queue: h.cfg.MainQueueURL, n: n, delay: delay, firstSent: first.at, unstamped: unstamped, rec: rec}
}

// toOperator forwards the record as it arrived (see sqsmsg.ForwardEntry),
// with the replays made so far and its first enqueue where there is room,
// and its trace header.
func (h *Handler) toOperator(rec events.SQSMessage, n int, reason string, first firstSend) decision {
	e := sqsmsg.ForwardEntry(rec, h.cfg.OperatorQueueURL, reason)
	if n > 0 {
		e.SetAttribute(sqsmsg.AttrReplayCount, counter(e, n-1))
	}
	unstamped := !stamp(&e, first)
	e.TraceHeader = rec.Attributes[sqsmsg.SystemAttrTraceHeader]
	return decision{entry: e, queue: h.cfg.OperatorQueueURL, n: n, reason: reason, firstSent: first.at, unstamped: unstamped, rec: rec}
}

// fifoDelay is replay n's backoff on a FIFO main queue. Its jitter is drawn
// from the DLQ record's id, not at random: the record is decided again on
// every visit, and the delay it waits out must be the same each time.
func (h *Handler) fifoDelay(rec events.SQSMessage, n int) time.Duration {
	sum := sha256.Sum256([]byte(rec.MessageId + "\x00" + strconv.Itoa(n)))
	r := float64(binary.BigEndian.Uint64(sum[:8])>>11) / (1 << 53)
	return roundSeconds(h.cfg.Backoff.Delay(n, r))
}

// HoldFor is how long a dead letter that reached a FIFO DLQ at sent (zero
// when unknown) must still stay hidden there at now to have waited out
// delay, in whole seconds rounded up; 0 means send it now. SQS resets a
// message's enqueue time (SentTimestamp) when it moves it to a FIFO DLQ, so
// sent is its arrival there, the same on every visit. A sent in the future
// (a clock that is off, or a hand-made event) counts as unknown, so no
// record is ever held for ever.
func HoldFor(sent time.Time, delay time.Duration, now time.Time) time.Duration {
	if sent.IsZero() || sent.After(now) || delay <= 0 {
		return 0
	}
	left := sent.Add(delay).Sub(now)
	if left <= 0 {
		return 0
	}
	return min(jitter.RoundUp(left, time.Second), MaxDelay)
}

// Expired reports whether a message first enqueued at first would be older
// than maxAge at visibleAt, when its replay would become visible. No limit
// (0) or an unknown first enqueue (zero) never expires.
func Expired(first time.Time, maxAge time.Duration, visibleAt time.Time) bool {
	return maxAge > 0 && !first.IsZero() && visibleAt.Sub(first) > maxAge
}

func roundSeconds(d time.Duration) time.Duration {
	return time.Duration(math.Round(d.Seconds())) * time.Second
}

// firstSend is what a record tells of its message's first enqueue.
type firstSend struct {
	at time.Time // zero when unknown
	// carried: the message has an sqs-once-first-sent attribute, valid or
	// not, which is sent on as it is and never replaced.
	carried bool
}

// firstSent reads sqs-once-first-sent (a String or Number attribute of
// decimal epoch milliseconds); without a valid one, the record's
// SentTimestamp stands in: the first enqueue on a message never replayed
// (SQS keeps it when it moves a message to a standard DLQ; a FIFO DLQ resets
// it to the move), a lower bound of the age otherwise.
func firstSent(rec events.SQSMessage) firstSend {
	a, carried := rec.MessageAttributes[sqsmsg.AttrFirstSent]
	if t, _, _ := strings.Cut(a.DataType, "."); carried && (t == "String" || t == "Number") && a.StringValue != nil {
		if at, ok := epochMillis(*a.StringValue); ok {
			return firstSend{at: at, carried: true}
		}
	}
	return firstSend{at: sentTimestamp(rec), carried: carried}
}

// sentTimestamp is the record's SentTimestamp, zero when absent or invalid.
func sentTimestamp(rec events.SQSMessage) time.Time {
	at, _ := epochMillis(rec.Attributes["SentTimestamp"])
	return at
}

// epochMillis parses decimal epoch milliseconds: digits only, after 1970
// and before the year 10000.
func epochMillis(s string) (time.Time, bool) {
	ms, err := strconv.ParseUint(s, 10, 63)
	if err != nil || ms == 0 || ms >= 253402300800000 {
		return time.Time{}, false
	}
	return time.UnixMilli(int64(ms)), true
}

// stamp adds sqs-once-first-sent to an entry whose message has none, where
// there is room. It reports false only when a known first enqueue could not
// be stamped.
func stamp(e *sqsmsg.Entry, first firstSend) bool {
	if first.carried || first.at.IsZero() {
		return true
	}
	v := sqsmsg.Number(0)
	v.StringValue = aws.String(strconv.FormatInt(first.at.UnixMilli(), 10))
	return e.SetAttribute(sqsmsg.AttrFirstSent, v)
}

// replayCount reads sqs-dlq-replay-nb: absent is 0; otherwise a String or
// Number attribute (custom suffixes allowed) written in decimal digits only,
// small enough that counting on cannot overflow.
func replayCount(attrs map[string]events.SQSMessageAttribute) (int, bool) {
	a, ok := attrs[sqsmsg.AttrReplayCount]
	if !ok {
		return 0, true
	}
	if t, _, _ := strings.Cut(a.DataType, "."); (t != "String" && t != "Number") || a.StringValue == nil {
		return 0, false
	}
	n, err := strconv.ParseUint(*a.StringValue, 10, 31) // no sign, point, exponent or space
	return int(n), err == nil
}

// counter is the counter attribute for n, keeping the data type the message
// already uses for it.
func counter(e sqsmsg.Entry, n int) sqstypes.MessageAttributeValue {
	v := sqsmsg.Number(n)
	if old, ok := e.Attributes[sqsmsg.AttrReplayCount]; ok {
		v.DataType = old.DataType
	}
	return v
}

func (h *Handler) logDecision(ctx context.Context, d decision, err error) {
	attrs := []slog.Attr{slog.String("messageId", d.entry.RecordID)}
	if d.n > 0 {
		attrs = append(attrs, slog.Int("n", d.n))
	}
	if !d.firstSent.IsZero() {
		attrs = append(attrs, slog.Int64("firstSent", d.firstSent.UnixMilli()))
	}
	if d.unstamped {
		attrs = append(attrs, slog.String("firstSentNotStamped", "no room for "+sqsmsg.AttrFirstSent))
	}
	level, msg := slog.LevelInfo, "replayed to the main queue"
	switch {
	case d.action == hold:
		msg = "held in the FIFO dead-letter queue for its backoff; it is replayed when it comes back"
		attrs = append(attrs, slog.String("destination", "dlq"), slog.Int("holdSeconds", int(d.holdFor/time.Second)))
	case d.action == behind:
		msg = "waits in the FIFO dead-letter queue behind an earlier message of its group"
		attrs = append(attrs, slog.String("destination", "dlq"))
	case d.reason == "":
		attrs = append(attrs, slog.String("destination", "main"), slog.Int("delaySeconds", int(d.entry.DelaySeconds)))
	default:
		level, msg = slog.LevelWarn, "forwarded to the operator queue"
		attrs = append(attrs, slog.String("destination", "operator"), slog.String("reason", d.reason))
	}
	if err != nil {
		level, msg = slog.LevelError, "not sent; the record stays in the DLQ and will be retried"
		if d.action == hold {
			level, msg = slog.LevelWarn, "held record not hidden; it comes back after the DLQ's visibility timeout and is held again"
		}
		attrs = append(attrs, slog.Any("error", err))
	}
	h.log.LogAttrs(ctx, level, msg, attrs...)
}
