package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqs-once/sqs-once/internal/dedupe"
	"github.com/sqs-once/sqs-once/internal/jitter"
)

// Business is the seam for the user's code: it runs at most once per
// idempotency key within the dedupe window (see the README's guarantees).
// Returning an error retries the message; returning Permanent(err) sends it
// to the operator queue when one is configured. The key is available from
// IdempotencyKey(ctx).
type Business func(ctx context.Context, msg events.SQSMessage) error

// SQSAPI is the part of the SQS client the processor uses: forwarding
// permanent failures and delaying failed records.
type SQSAPI interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

var _ SQSAPI = (*sqs.Client)(nil)

// Deps are the handler's collaborators; zero clock and random source mean the
// real ones.
type Deps struct {
	DynamoDB dedupe.DynamoAPI
	SQS      SQSAPI
	Business Business
	Now      func() time.Time
	// Rand returns a uniform value in [0, 1) for the failure backoff jitter.
	Rand func() float64
	// Sleep waits between retries of a completion write.
	Sleep func(ctx context.Context, d time.Duration) error
	// Logger receives one line per record; nil means slog.Default().
	Logger *slog.Logger
}

// Handler consumes one queue's Lambda SQS events.
type Handler struct {
	cfg      Config
	guard    *dedupe.Guard
	sqs      SQSAPI
	business Business
	rand     func() float64
	backoff  jitter.Policy
	log      *slog.Logger
}

// NewHandler builds the handler with SDK clients from awsCfg.
func NewHandler(cfg Config, awsCfg aws.Config, business Business) *Handler {
	return New(cfg, Deps{
		DynamoDB: dynamodb.NewFromConfig(awsCfg),
		SQS:      sqs.NewFromConfig(awsCfg),
		Business: business,
	})
}

// New builds the handler from explicit collaborators.
func New(cfg Config, d Deps) *Handler {
	if d.Rand == nil {
		d.Rand = rand.Float64
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	return &Handler{
		cfg: cfg,
		guard: &dedupe.Guard{
			Store:        dedupe.NewStore(d.DynamoDB, cfg.Table, cfg.KeyPrefix),
			LockTimeout:  cfg.LockTimeout,
			DedupeWindow: cfg.DedupeWindow,
			Now:          d.Now,
			Sleep:        d.Sleep,
		},
		sqs:      d.SQS,
		business: d.Business,
		rand:     d.Rand,
		backoff:  failureBackoff(cfg.FailureBackoffBase),
		log:      d.Logger,
	}
}

// verdict is what the record's fate in the batch response will be.
type verdict int

const (
	done       verdict = iota // deleted by SQS
	retry                     // listed in batchItemFailures
	toOperator                // forwarded, then deleted; retried if forwarding fails
)

type outcome struct{ verdict verdict }

// Handle processes a batch and reports the records to retry. It returns an
// error never: an error would fail the whole batch and make Lambda scale its
// polling down for what are per-record problems.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	outcomes := make([]outcome, len(ev.Records))
	sem := make(chan struct{}, h.cfg.MaxConcurrency)
	var wg sync.WaitGroup
	for _, unit := range orderedUnits(ev.Records) {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			h.runUnit(ctx, ev.Records, unit, outcomes)
		})
	}
	wg.Wait()

	h.forwardPermanent(ctx, ev.Records, outcomes)

	var resp events.SQSEventResponse
	var failed []events.SQSMessage
	for i, o := range outcomes {
		if o.verdict == retry {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: ev.Records[i].MessageId})
			failed = append(failed, ev.Records[i])
		}
	}
	h.delayRetries(ctx, failed)
	return resp, nil
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

// runUnit processes a unit's records in order. After a failure the rest of
// the unit is retried unprocessed: running them would break FIFO order.
func (h *Handler) runUnit(ctx context.Context, records []events.SQSMessage, unit []int, outcomes []outcome) {
	for n, i := range unit {
		outcomes[i] = h.process(ctx, records[i])
		if outcomes[i].verdict == done {
			continue
		}
		for _, j := range unit[n+1:] {
			outcomes[j] = outcome{verdict: retry}
			h.log.InfoContext(ctx, "record skipped", "messageId", records[j].MessageId, "outcome", "group-blocked",
				"blockedBy", records[i].MessageId)
		}
		return
	}
}

func (h *Handler) process(ctx context.Context, msg events.SQSMessage) outcome {
	log := h.log.With("messageId", msg.MessageId, "receiveCount", msg.Attributes["ApproximateReceiveCount"])
	key, err := h.cfg.Key.Key(msg)
	if err != nil {
		log.ErrorContext(ctx, "record not processed: no idempotency key; it will be retried and reach the dead-letter queue",
			"outcome", "no-key", "error", err)
		return outcome{verdict: retry}
	}
	log = log.With("key", key)

	res := h.guard.Do(ctx, key, func(ctx context.Context) error {
		return h.runBusiness(context.WithValue(ctx, keyContext{}, key), msg)
	})
	log = log.With("outcome", res.Outcome.String())
	switch res.Outcome {
	case dedupe.Processed:
		log.InfoContext(ctx, "record processed", "tookOver", res.TookOver)
		return outcome{verdict: done}
	case dedupe.ProcessedUnrecorded:
		if errors.Is(res.Err, dedupe.ErrLockLost) {
			log.ErrorContext(ctx, "record processed after its lock expired and another holder took the key over: that holder runs it too (duplicate possible); raise LOCK_TIMEOUT above the handler's run time",
				"error", res.Err)
		} else {
			log.ErrorContext(ctx, "record processed but its completion was not recorded: a delivery of the same key after the lock expires would run it again (duplicate possible)",
				"error", res.Err, "lockExpiresAt", res.LockExpiresAt)
		}
		return outcome{verdict: done}
	case dedupe.Duplicate:
		log.InfoContext(ctx, "duplicate suppressed", "detail", res.Err)
		return outcome{verdict: done}
	case dedupe.InProgress:
		if h.cfg.InProgress == InProgressDrop {
			log.WarnContext(ctx, "record dropped: in progress elsewhere (IN_PROGRESS=drop)", "detail", res.Err)
			return outcome{verdict: done}
		}
		log.InfoContext(ctx, "record in progress elsewhere; retried later", "detail", res.Err)
		return outcome{verdict: retry}
	case dedupe.Failed:
		if res.ReleaseErr != nil {
			log.WarnContext(ctx, "lock not released; it expires on its own", "error", res.ReleaseErr)
		}
		if IsPermanent(res.Err) && h.cfg.OperatorQueueURL != "" {
			log.WarnContext(ctx, "record failed permanently; forwarding to the operator queue", "error", res.Err)
			return outcome{verdict: toOperator}
		}
		log.WarnContext(ctx, "record failed; retried later", "error", res.Err, "permanent", IsPermanent(res.Err))
		return outcome{verdict: retry}
	}
	if errors.Is(res.Err, dedupe.ErrMisconfigured) {
		log.ErrorContext(ctx, "record not processed: idempotency table misconfigured; check IDEMPOTENCY_TABLE, its key schema (id, string) and the function's permissions",
			"error", res.Err)
	} else {
		log.ErrorContext(ctx, "record not processed: idempotency store unavailable; retried later", "error", res.Err)
	}
	return outcome{verdict: retry}
}

// runBusiness turns a panic into a failure, so the lock is released and the
// other records of the batch are still reported.
func (h *Handler) runBusiness(ctx context.Context, msg events.SQSMessage) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("business handler panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return h.business(ctx, msg)
}

type keyContext struct{}

// IdempotencyKey returns the key of the record a Business function is
// running for.
func IdempotencyKey(ctx context.Context) string {
	key, _ := ctx.Value(keyContext{}).(string)
	return key
}
