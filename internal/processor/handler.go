package processor

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqs-once/sqs-once/internal/dedupe"
	"github.com/sqs-once/sqs-once/internal/jitter"
	"github.com/sqs-once/sqs-once/internal/retrybudget"
	"github.com/sqs-once/sqs-once/internal/target"
)

// Business is the seam for the user's code: it runs at most once per
// idempotency key within the dedupe window (see the README's guarantees).
// Returning an error retries the message; returning Permanent(err) sends it
// to the operator queue when one is configured. Only a nil return counts as
// success: a panic or runtime.Goexit is a failure. The key and the lock's
// fencing token are available from IdempotencyKey(ctx) and FenceToken(ctx).
type Business func(ctx context.Context, msg events.SQSMessage) error

// SQSAPI is the part of the SQS client the processor uses: forwarding
// permanent failures, delaying failed records, and checking the consumed
// queue's settings.
type SQSAPI interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	// GetQueueAttributes checks the consumed queue's settings (QUEUE_URL).
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

var _ SQSAPI = (*sqs.Client)(nil)

// Deps are the handler's collaborators; zero clock and random source mean the
// real ones.
type Deps struct {
	DynamoDB dedupe.DynamoAPI
	SQS      SQSAPI
	Business Business
	// Target receives the acquired records instead of Business, one
	// delivery per batch; exactly one of the two is set.
	Target target.Target
	Now    func() time.Time
	// After has the signature of time.After (nil means it); lock renewal
	// waits on it.
	After func(d time.Duration) <-chan time.Time
	// Rand returns a uniform value in [0, 1) for the failure backoff jitter.
	Rand func() float64
	// Sleep waits between retries of a completion write.
	Sleep func(ctx context.Context, d time.Duration) error
	// Logger receives one line per record; nil means slog.Default().
	Logger *slog.Logger
	// Metrics, when set, receives the invocation's CloudWatch Embedded
	// Metric Format lines at the end of each Handle (see metrics.go); nil
	// writes none. The Lambda function passes its standard output, which
	// CloudWatch Logs reads the metrics from.
	Metrics io.Writer
	// FunctionName is the metrics' FunctionName dimension. Empty: the
	// AWS_LAMBDA_FUNCTION_NAME Lambda sets, else the key prefix.
	FunctionName string
}

// Handler consumes one queue's Lambda SQS events.
type Handler struct {
	cfg      Config
	guard    *dedupe.Guard
	sqs      SQSAPI
	business Business
	target   target.Target
	now      func() time.Time
	rand     func() float64
	backoff  jitter.Policy
	log      *slog.Logger
	metrics  io.Writer
	// functionName is the metrics' FunctionName dimension.
	functionName string
	// queueChecked makes checkQueue run once per execution environment.
	queueChecked sync.Once
	// maxReceives is the consumed queue's maxReceiveCount as checkQueue
	// read it; 0 while unknown.
	maxReceives atomic.Int64
}

// NewHandler builds the handler with SDK clients from awsCfg, whose retries
// back off at most retrybudget.MaxBackoff and end when the call's time is up.
func NewHandler(cfg Config, awsCfg aws.Config, business Business) (*Handler, error) {
	return NewHandlerWith(cfg, awsCfg, Deps{Business: business})
}

// NewHandlerWith is New with the DynamoDB and SQS clients, and the Target
// of cfg.Target, built from awsCfg as NewHandler builds them; d gives the
// rest (Business, Logger, Metrics, ...). With cfg.Target set, d.Business
// must be nil: the target receives the records.
func NewHandlerWith(cfg Config, awsCfg aws.Config, d Deps) (*Handler, error) {
	d.DynamoDB = dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) { o.Retryer = retrybudget.Client(o.Retryer) })
	d.SQS = sqs.NewFromConfig(awsCfg, func(o *sqs.Options) { o.Retryer = retrybudget.Client(o.Retryer) })
	logger := d.Logger
	if cfg.Target != "" {
		if d.Business != nil {
			return nil, &ConfigError{Field: "Target", Msg: "set together with a handler: choose one"}
		}
		spec, err := target.ParseSpec(cfg.Target)
		if err != nil {
			return nil, &ConfigError{Field: "Target", Msg: err.Error()}
		}
		t, err := target.New(spec, awsCfg, target.Options{
			EventSource: cfg.TargetEventSource,
			DetailType:  cfg.TargetDetailType,
			// The function's own name, as Lambda sets it: invoking itself
			// would loop.
			Self:   os.Getenv("AWS_LAMBDA_FUNCTION_NAME"),
			Logger: logger,
		})
		if err != nil {
			return nil, &ConfigError{Field: "Target", Msg: err.Error()}
		}
		d.Target = t
	}
	return New(cfg, d)
}

// New builds the handler from explicit collaborators. Zero values in cfg mean
// the documented defaults; a value that cannot work is an error naming the
// field.
func New(cfg Config, d Deps) (*Handler, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	switch {
	case d.DynamoDB == nil:
		return nil, errors.New("processor: Deps.DynamoDB is nil")
	case d.SQS == nil:
		return nil, errors.New("processor: Deps.SQS is nil")
	case d.Business == nil && d.Target == nil:
		return nil, errors.New("processor: Deps.Business and Deps.Target are nil: set one")
	case d.Business != nil && d.Target != nil:
		return nil, errors.New("processor: Deps.Business and Deps.Target are both set: set one")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Rand == nil {
		d.Rand = rand.Float64
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.FunctionName == "" {
		d.FunctionName = cmp.Or(os.Getenv("AWS_LAMBDA_FUNCTION_NAME"), cfg.KeyPrefix)
	}
	var cache *dedupe.CompletedCache
	if cfg.LocalCache > 0 {
		cache = dedupe.NewCompletedCache(cfg.LocalCache)
	}
	return &Handler{
		cfg: cfg,
		guard: &dedupe.Guard{
			Store:        dedupe.NewStore(d.DynamoDB, cfg.Table, cfg.KeyPrefix),
			LockTimeout:  cfg.LockTimeout,
			DedupeWindow: cfg.DedupeWindow,
			Now:          d.Now,
			Sleep:        d.Sleep,
			After:        d.After,
			Cache:        cache,
		},
		sqs:          budgetedSQS{d.SQS},
		business:     d.Business,
		target:       d.Target,
		now:          d.Now,
		rand:         d.Rand,
		backoff:      failureBackoff(cfg.FailureBackoffBase),
		log:          d.Logger,
		metrics:      d.Metrics,
		functionName: d.FunctionName,
	}, nil
}

// verdict is what the record's fate in the batch response will be. The zero
// value is a failure: a record whose processing ended in any way other than
// an explicit outcome is retried, never deleted.
type verdict int

const (
	retry      verdict = iota // listed in batchItemFailures
	done                      // deleted by SQS
	toOperator                // forwarded, then deleted; retried if forwarding fails
)

type outcome struct {
	verdict verdict
	reason  string // the operator queue's sqs-once-reason, for toOperator
	// metric is what the record counts as (metrics.go), failure the
	// Reason of MetricFailed, and lockLost whether its lock was lost while
	// its handler ran.
	metric   string
	failure  string
	lockLost bool
}

// retried is the outcome of a record reported failed for reason (one of
// the Failure constants), so SQS delivers it again.
func retried(reason string) outcome {
	return outcome{verdict: retry, metric: MetricFailed, failure: reason}
}

// Handle processes a batch and reports the records to retry. Per-record
// problems never fail the whole batch (that would make Lambda scale its
// polling down); the one error it returns is a configuration that only the
// event shows to be wrong: an operator queue that is the queue being
// consumed.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	if err := h.checkSource(ev.Records); err != nil {
		h.log.ErrorContext(ctx, "invalid configuration; no record processed", "error", err)
		return events.SQSEventResponse{}, err
	}
	h.checkQueue(ctx)
	b := newBudget(ctx, h.now())
	ctx, cancel := b.context(ctx)
	defer cancel()
	var outcomes []outcome
	if h.target != nil {
		outcomes = h.deliver(ctx, b, ev.Records)
	} else {
		outcomes = make([]outcome, len(ev.Records))
		h.eachUnit(ev.Records, func(unit []int) { h.runUnit(ctx, b, ev.Records, unit, outcomes) })
	}
	h.forwardPermanent(ctx, ev.Records, outcomes)

	var resp events.SQSEventResponse
	var failed []events.SQSMessage
	for i, o := range outcomes {
		if o.verdict == retry {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: ev.Records[i].MessageId})
			failed = append(failed, ev.Records[i])
		}
	}
	backoffs := h.delayRetries(ctx, failed)
	h.emitMetrics(ctx, outcomes, backoffs)
	return resp, nil
}

// eachUnit runs fn for every unit of records (orderedUnits), up to
// MaxConcurrency at once, and returns when all have returned.
func (h *Handler) eachUnit(records []events.SQSMessage, fn func(unit []int)) {
	sem := make(chan struct{}, h.cfg.MaxConcurrency)
	var wg sync.WaitGroup
	for _, unit := range orderedUnits(records) {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(unit)
		})
	}
	wg.Wait()
}

// orderedUnits groups record indexes into units that run one after another:
// on a FIFO queue one unit per message group, in queue order; otherwise one
// unit per record, so all run concurrently.
func orderedUnits(records []events.SQSMessage) [][]int {
	var units [][]int
	group := map[string]int{}
	for i, rec := range records {
		if !strings.HasSuffix(rec.EventSourceARN, ".fifo") {
			units = append(units, []int{i})
			continue
		}
		id := rec.Attributes["MessageGroupId"]
		if u, ok := group[id]; ok {
			units[u] = append(units[u], i)
			continue
		}
		group[id] = len(units)
		units = append(units, []int{i})
	}
	return units
}

// runUnit processes a unit's records in order.
func (h *Handler) runUnit(ctx context.Context, b budget, records []events.SQSMessage, unit []int, outcomes []outcome) {
	h.walkUnit(ctx, b, records, unit, outcomes, func(i int) bool {
		outcomes[i] = h.process(ctx, records[i])
		return outcomes[i].verdict == done
	})
}

// walkUnit calls step for a unit's records in order while it returns true.
// After a record that did not go on (a failure) the rest of the unit is
// retried unprocessed: running them would break FIFO order. A record is not
// started inside the reserve kept for the batch's last calls; it stays
// failed (its outcome the zero one, counted as not started), and SQS
// delivers it again.
func (h *Handler) walkUnit(ctx context.Context, b budget, records []events.SQSMessage, unit []int, outcomes []outcome, step func(i int) bool) {
	for n, i := range unit {
		if left, ok := b.canStart(h.now()); !ok {
			for _, j := range unit[n:] {
				h.log.WarnContext(ctx, "record not started: the rest of the invocation is kept for the batch's last calls; retried later",
					"messageId", records[j].MessageId, "outcome", "not-started", "timeLeft", left.String(), "reserve", b.reserve.String())
			}
			return
		}
		if step(i) {
			continue
		}
		for _, j := range unit[n+1:] {
			h.log.InfoContext(ctx, "record skipped", "messageId", records[j].MessageId, "outcome", "group-blocked",
				"blockedBy", records[i].MessageId)
			outcomes[j] = retried(FailureGroupBlocked)
		}
		return
	}
}

func (h *Handler) process(ctx context.Context, msg events.SQSMessage) outcome {
	key, log, ok := h.key(ctx, msg)
	if !ok {
		return retried(FailureNoKey)
	}
	res := h.guard.DoPayload(ctx, key, h.payloadHash(msg), func(ctx context.Context) error { return h.business(ctx, msg) })
	return h.report(ctx, log, res)
}

// key reads msg's idempotency key, and returns the record's logger with it.
// A record without a key is logged and retried (ok false).
func (h *Handler) key(ctx context.Context, msg events.SQSMessage) (key string, log *slog.Logger, ok bool) {
	log = h.log.With("messageId", msg.MessageId, "receiveCount", msg.Attributes["ApproximateReceiveCount"])
	key, err := h.cfg.Key.Key(msg)
	if err != nil {
		log.ErrorContext(ctx, "record not processed: no idempotency key; it will be retried and reach the dead-letter queue",
			"outcome", "no-key", "error", err)
		return "", log, false
	}
	return key, log.With("key", key), true
}

// report logs what the lock protocol did with a record and decides its
// fate in the batch response, and what it counts as in the metrics.
func (h *Handler) report(ctx context.Context, log *slog.Logger, res dedupe.Result) outcome {
	o := h.judge(ctx, log, res)
	o.lockLost = res.LockLost || errors.Is(res.Err, dedupe.ErrLockLost)
	return o
}

// judge is report's decision, from the lock protocol's result alone.
func (h *Handler) judge(ctx context.Context, log *slog.Logger, res dedupe.Result) outcome {
	log = log.With("outcome", res.Outcome.String())
	if res.Fence > 0 {
		log = log.With("fence", res.Fence)
	}
	switch res.Outcome {
	case dedupe.Processed:
		msg := "record processed"
		if h.target != nil {
			msg = "record delivered to the target"
		}
		log.InfoContext(ctx, msg, "tookOver", res.TookOver)
		return outcome{verdict: done, metric: MetricProcessed}
	case dedupe.ProcessedUnrecorded:
		if errors.Is(res.Err, dedupe.ErrLockLost) {
			log.ErrorContext(ctx, "record processed after its lock expired and another holder took the key over: that holder runs it too (duplicate possible); raise LOCK_TIMEOUT or make the handler stop when its context ends",
				"error", res.Err)
		} else {
			log.ErrorContext(ctx, "record processed but its completion was not recorded: a delivery of the same key after the lock expires would run it again (duplicate possible)",
				"error", res.Err, "lockExpiresAt", res.LockExpiresAt)
		}
		return outcome{verdict: done, metric: MetricUnrecordedCompletion}
	case dedupe.Duplicate:
		log.InfoContext(ctx, "duplicate suppressed", "detail", res.Err, "cached", res.Cached)
		return outcome{verdict: done, metric: MetricDuplicate}
	case dedupe.PayloadMismatch:
		if h.cfg.OperatorQueueURL != "" {
			log.ErrorContext(ctx, "record refused: its key was seen with another body (a producer reuses keys, or the key setting is too coarse); forwarding to the operator queue",
				"error", res.Err)
			return outcome{verdict: toOperator, reason: ReasonPayloadMismatch}
		}
		log.ErrorContext(ctx, "record refused: its key was seen with another body (a producer reuses keys, or the key setting is too coarse); retried, and it reaches the dead-letter queue",
			"error", res.Err)
		return retried(FailurePayloadMismatch)
	case dedupe.InProgress:
		if h.cfg.InProgress == InProgressDrop {
			log.WarnContext(ctx, "record dropped: in progress elsewhere (IN_PROGRESS=drop)", "detail", res.Err)
			return outcome{verdict: done, metric: MetricInProgressDropped}
		}
		log.InfoContext(ctx, "record in progress elsewhere; retried later", "detail", res.Err)
		return outcome{verdict: retry, metric: MetricInProgress}
	case dedupe.Failed:
		if res.LockLost {
			log.WarnContext(ctx, "record failed: its lock was lost while the handler ran (renewal refused or not possible); retried later",
				"error", res.Err)
			return retried(FailureLockLost)
		}
		if res.ReleaseErr != nil {
			log.WarnContext(ctx, "lock not released; it expires on its own", "error", res.ReleaseErr)
		}
		if errors.Is(res.Err, target.ErrRefused) && h.cfg.OperatorQueueURL != "" {
			log.ErrorContext(ctx, "record refused by the target for good; forwarding to the operator queue", "error", res.Err)
			return outcome{verdict: toOperator, reason: ReasonTargetRefused}
		}
		if IsPermanent(res.Err) && h.cfg.OperatorQueueURL != "" {
			log.WarnContext(ctx, "record failed permanently; forwarding to the operator queue", "error", res.Err)
			return outcome{verdict: toOperator, reason: ReasonPermanent}
		}
		log.WarnContext(ctx, "record failed; retried later", "error", res.Err,
			"permanent", IsPermanent(res.Err) || errors.Is(res.Err, target.ErrRefused))
		return retried(FailureHandler)
	}
	if errors.Is(res.Err, dedupe.ErrMisconfigured) {
		log.ErrorContext(ctx, "record not processed: idempotency table misconfigured; check IDEMPOTENCY_TABLE, its key schema (id, string), KEY_PREFIX and the function's permissions",
			"error", res.Err)
		return retried(FailureStoreMisconfigured)
	}
	log.ErrorContext(ctx, "record not processed: idempotency store unavailable; retried later", "error", res.Err)
	return retried(FailureStoreUnavailable)
}

// payloadHash is the SHA-256 of the body when payloads are validated.
func (h *Handler) payloadHash(msg events.SQSMessage) string {
	if !h.cfg.ValidatePayload {
		return ""
	}
	sum := sha256.Sum256([]byte(msg.Body))
	return hex.EncodeToString(sum[:])
}

// Do runs fn under key's lock, with the processor's table, lock and window:
// the guarantee of a record for any function. It returns nil when fn ran and
// succeeded (or succeeded but its completion could not be recorded, which is
// logged), fn's error when it failed (the lock released), and otherwise an
// error matching dedupe.ErrDuplicate, dedupe.ErrInProgress,
// dedupe.ErrUnavailable or dedupe.ErrMisconfigured; fn did not run then.
func (h *Handler) Do(ctx context.Context, key string, fn func(context.Context) error) error {
	if key == "" || len(key) > maxKeyBytes {
		return fmt.Errorf("%w: key of %d bytes, want 1 to %d", ErrNoKey, len(key), maxKeyBytes)
	}
	res := h.guard.Do(ctx, key, fn)
	switch res.Outcome {
	case dedupe.Processed:
		return nil
	case dedupe.ProcessedUnrecorded:
		h.log.ErrorContext(ctx, "function ran but its completion was not recorded: a later call with the same key after the lock expires would run it again (duplicate possible)",
			"key", key, "error", res.Err)
		return nil
	}
	return res.Err
}

// IdempotencyKey returns the key of the record a Business function is
// running for.
func IdempotencyKey(ctx context.Context) string {
	lease, _ := dedupe.LeaseFrom(ctx)
	return lease.Key
}

// FenceToken returns the fencing token of the lock a Business function runs
// under: larger than every earlier acquisition's of the key
// (a 64-bit number; a new record starts from the clock in milliseconds). Pass it
// to a downstream store that refuses writes with a token lower than one it
// has seen, and a holder whose lock was taken over can no longer write there.
func FenceToken(ctx context.Context) int64 {
	lease, _ := dedupe.LeaseFrom(ctx)
	return lease.Fence
}
