package replay

import (
	"context"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/retrybudget"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
)

// Reasons in the sqs-once-reason attribute of operator-queue messages.
const (
	ReasonMaxAttempts    = "max-attempts"
	ReasonInvalidCounter = "invalid-counter"
	ReasonAttributeLimit = "attribute-limit"
	ReasonMissingGroupID = "missing-group-id"
)

// Handler is the Lambda handler.
type Handler struct {
	cfg  Config
	api  sqsmsg.BatchSender
	rand func() float64
	log  *slog.Logger
}

// NewHandler builds the handler and its SQS client, whose retries back off
// at most retrybudget.MaxBackoff and end when the call's time is up.
func NewHandler(cfg Config, awsCfg aws.Config) *Handler {
	return New(cfg, Deps{SQS: sqs.NewFromConfig(awsCfg, func(o *sqs.Options) { o.Retryer = retrybudget.Client(o.Retryer) })})
}

// Deps are the handler's collaborators; a nil random source or logger means
// math/rand/v2 and slog.Default().
type Deps struct {
	SQS sqsmsg.BatchSender
	// Rand returns a uniform value in [0, 1) for the backoff jitter.
	Rand   func() float64
	Logger *slog.Logger
}

// New builds the handler from explicit collaborators.
func New(cfg Config, d Deps) *Handler {
	if d.Rand == nil {
		d.Rand = rand.Float64
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	return &Handler{cfg: cfg, api: budgetedSender{d.SQS}, rand: d.Rand, log: d.Logger}
}

// budgetedSender bounds every send's retries by its context's deadline.
type budgetedSender struct{ api sqsmsg.BatchSender }

func (s budgetedSender) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return s.api.SendMessageBatch(ctx, in, append(optFns, retrybudget.SQS(ctx))...)
}

// decision is where one record goes and as what.
type decision struct {
	entry  sqsmsg.Entry
	queue  string
	n      int    // the replay this would be; 0 when the counter is invalid
	reason string // set for the operator queue
}

// sendsInFlight is how many SendMessageBatch calls one invocation makes at
// once. A batch of 1000 dead letters is over a hundred calls: one after the
// other they could outlast the 30 s timeout, ten at a time they take about
// twelve calls' time. A standard queue takes that from every invocation; a
// FIFO queue's call quota may throttle many invocations at once, and the
// SDK then retries. The template bounds ReplayerBatchSize by this figure
// (see TestTemplateBatchSizeFitsTheTimeout).
const sendsInFlight = 10

// Handle replays or forwards every record, in one SendMessageBatch per 10
// messages per destination, up to sendsInFlight calls at once, and reports
// the records not accepted as batch item failures so they stay in the DLQ.
// Per-record problems never make it return an error.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	decisions := make([]decision, len(ev.Records))
	byQueue := map[string][]sqsmsg.Entry{}
	for i, rec := range ev.Records {
		d := h.decide(rec, h.rand())
		decisions[i] = d
		byQueue[d.queue] = append(byQueue[d.queue], d.entry)
	}
	// The sends end before the response share of the invocation's reserve:
	// a send still running at the timeout would cost the whole response.
	sendCtx, cancel := sendContext(ctx)
	defer cancel()
	failed := sqsmsg.SendBatches(sendCtx, h.api, sendsInFlight,
		sqsmsg.Batch{QueueURL: h.cfg.MainQueueURL, Entries: byQueue[h.cfg.MainQueueURL]},
		sqsmsg.Batch{QueueURL: h.cfg.OperatorQueueURL, Entries: byQueue[h.cfg.OperatorQueueURL]})
	var resp events.SQSEventResponse
	for _, d := range decisions {
		err := failed[d.entry.RecordID]
		h.logDecision(ctx, d, err)
		if err != nil {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: d.entry.RecordID})
		}
	}
	return resp, nil
}

func sendContext(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	share := retrybudget.ResponseShare(retrybudget.Reserve(time.Until(deadline)))
	return context.WithDeadline(ctx, deadline.Add(-share))
}

func (h *Handler) decide(rec events.SQSMessage, r float64) decision {
	prev, ok := replayCount(rec.MessageAttributes)
	n := prev + 1
	switch {
	case !ok:
		return h.toOperator(rec, 0, ReasonInvalidCounter)
	case n > h.cfg.MaxAttempts:
		return h.toOperator(rec, n, ReasonMaxAttempts)
	case sqsmsg.IsFIFO(h.cfg.MainQueueURL) && rec.Attributes["MessageGroupId"] == "":
		return h.toOperator(rec, n, ReasonMissingGroupID)
	}
	e := sqsmsg.FromRecord(rec)
	// An original id the message already carries, String or Binary, is
	// kept as it is: the processor keys on it.
	orig, ok := sqsmsg.OriginalMessageID(rec)
	if !ok {
		orig = rec.MessageId
		if !e.SetAttribute(sqsmsg.AttrOriginalMessageID, sqsmsg.String(orig)) {
			return h.toOperator(rec, n, ReasonAttributeLimit)
		}
	}
	if !e.SetAttribute(sqsmsg.AttrReplayCount, counter(e, n)) {
		return h.toOperator(rec, n, ReasonAttributeLimit)
	}
	if sqsmsg.IsFIFO(h.cfg.MainQueueURL) {
		// FIFO queues refuse per-message delays. A fresh id per replay keeps
		// the replay from being swallowed as a duplicate of the original or
		// of an earlier replay; the DLQ record's own id makes it fresh even
		// when an operator reset the counter, while Lambda's retry of the
		// same record sends the same id and is deduplicated.
		e.DeduplicationID = sqsmsg.DeduplicationID("replay", orig, strconv.Itoa(n), rec.MessageId)
	} else {
		e.DelaySeconds = int32(math.Round(h.cfg.Backoff.Delay(n, r).Seconds()))
	}
	return decision{entry: e, queue: h.cfg.MainQueueURL, n: n}
}

// toOperator forwards the record as it arrived (see sqsmsg.ForwardEntry),
// with the replays made so far where there is room.
func (h *Handler) toOperator(rec events.SQSMessage, n int, reason string) decision {
	e := sqsmsg.ForwardEntry(rec, h.cfg.OperatorQueueURL, reason)
	if n > 0 {
		e.SetAttribute(sqsmsg.AttrReplayCount, counter(e, n-1))
	}
	return decision{entry: e, queue: h.cfg.OperatorQueueURL, n: n, reason: reason}
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
	level, msg := slog.LevelInfo, "replayed to the main queue"
	if d.reason == "" {
		attrs = append(attrs, slog.String("destination", "main"), slog.Int("delaySeconds", int(d.entry.DelaySeconds)))
	} else {
		level, msg = slog.LevelWarn, "forwarded to the operator queue"
		attrs = append(attrs, slog.String("destination", "operator"), slog.String("reason", d.reason))
	}
	if err != nil {
		level, msg = slog.LevelError, "not sent; the record stays in the DLQ and will be retried"
		attrs = append(attrs, slog.Any("error", err))
	}
	h.log.LogAttrs(ctx, level, msg, attrs...)
}
