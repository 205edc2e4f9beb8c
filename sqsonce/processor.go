package sqsonce

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqs-once/sqs-once/internal/clock"
	"github.com/sqs-once/sqs-once/internal/jitter"
	"github.com/sqs-once/sqs-once/internal/leasectx"
	"github.com/sqs-once/sqs-once/internal/retrybudget"
	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// Handler is your code for one SQS message: nil when its side effect is
// done, an error to retry it, Permanent(err) when no retry can fix it. A
// panic counts as an error. Key and Fence read the lock from ctx. A message
// without a key never reaches it: it is retried, and dead-lettered.
type Handler func(ctx context.Context, msg events.SQSMessage) error

// sqsAPI is the part of the SQS client the processor uses: forwarding to the
// operator queue, delaying failed records, and checking the consumed queue's
// settings.
type sqsAPI interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

var _ sqsAPI = (*sqs.Client)(nil)

// deps are what a test replaces besides the Config: the SQS client, the
// renewal's timer, the completion's sleep. Zero values mean the real ones.
type deps struct {
	sqs   sqsAPI
	after func(d time.Duration) <-chan time.Time
	sleep func(ctx context.Context, d time.Duration) error
}

// Processor runs functions once per key under the lock: Do and DoResult,
// and, when NewConsumer built it, Handle for SQS events. It is safe for
// concurrent use (Lambda Managed Instances run several invocations in one
// process); build one per process.
type Processor struct {
	cfg     ConsumerConfig
	lock    *locker
	sqs     sqsAPI
	handler Handler
	target  Target
	rand    func() float64
	backoff jitter.Policy
	log     *slog.Logger
	// queueChecked makes checkQueue run once per execution environment.
	queueChecked sync.Once
	// maxReceives is the consumed queue's maxReceiveCount as checkQueue
	// read it; 0 while unknown.
	maxReceives atomic.Int64
}

// New builds a Processor for Do and DoResult (its Handle returns
// ErrNoHandler). An invalid cfg is an error naming every bad field.
func New(cfg Config) (*Processor, error) {
	return newDo(cfg, deps{})
}

// newDo is New with a test's deps.
func newDo(cfg Config, d deps) (*Processor, error) {
	var bad badField
	checked := cfg.check(&bad)
	if err := errors.Join(bad...); err != nil {
		return nil, cfg.envError(err)
	}
	return build(ConsumerConfig{Config: checked}, nil, d)
}

// NewConsumer builds a Processor whose Handle runs h for each record of an
// SQS event, or hands the records to cfg.Target when h is nil; Do works on
// it too. An invalid cfg is an error naming every bad field (or, for a
// ConfigFromEnv's, its variable).
func NewConsumer(cfg ConsumerConfig, h Handler) (*Processor, error) {
	return newProcessor(cfg, h, deps{})
}

func newProcessor(cfg ConsumerConfig, h Handler, d deps) (*Processor, error) {
	cfg, err := cfg.check(h != nil)
	if err != nil {
		return nil, cfg.envError(err)
	}
	return build(cfg, h, d)
}

// build makes the Processor of a checked configuration.
func build(cfg ConsumerConfig, h Handler, d deps) (*Processor, error) {
	// Any AWS configuration brings SQS in, for the in-progress hiding;
	// without one (a test on sqsoncetest's store) only what needs SQS does.
	if d.sqs == nil && (cfg.needsSQS() || cfg.AWS.Region != "" || cfg.AWS.BaseEndpoint != nil) {
		d.sqs = sqs.NewFromConfig(cfg.AWS, func(o *sqs.Options) {
			o.Retryer = retrybudget.Client(o.Retryer)
			// A forward to the operator queue SQS answered is never sent
			// twice (see SafeRequestBody).
			o.APIOptions = append(o.APIOptions, retrybudget.SafeRequestBody)
		})
	}
	if cfg.Test.Rand == nil {
		cfg.Test.Rand = rand.Float64
	}
	if d.after == nil {
		d.after = time.After
	}
	if d.sleep == nil {
		d.sleep = clock.Sleep
	}
	var cache *completedCache
	if cfg.LocalCache > 0 {
		cache = newCompletedCache(cfg.LocalCache)
	}
	return &Processor{
		cfg: cfg,
		lock: &locker{
			store:       cfg.Store,
			prefix:      cfg.KeyPrefix,
			lockTimeout: cfg.LockTimeout,
			window:      cfg.DedupeWindow,
			now:         cfg.Test.Now,
			sleep:       d.sleep,
			after:       d.after,
			cache:       cache,
			newOwner:    randomOwner,
			hashKeys:    cfg.HashKeys,
			rand:        cfg.Test.Rand,
			// A func, not an interface: one question, asked per refusal.
			permanentEffect: cfg.PermanentEffect,
			sender:          cfg.Sender,
		},
		sqs:     d.sqs,
		handler: h,
		target:  cfg.Target,
		rand:    cfg.Test.Rand,
		backoff: failureBackoff(cfg.FailureBackoffBase),
		log:     cfg.Logger,
	}, nil
}

func (p *Processor) now() time.Time { return p.cfg.Test.Now() }

// outcome is a record's Outcome as Handle decides it, with what only the
// batch needs besides. Its Kind also says the record's fate in the batch
// response (retried); before forwardPermanent, KindForwardedToOperator
// means bound for the operator queue.
type outcome struct {
	Outcome
	// hideUntil, on a record refused as in progress, is when the lock that
	// refused it can be taken over: the record is hidden until then
	// (delayRetries), so its next receive is the one that can take it.
	hideUntil time.Time
}

// settled: the record is deleted, and not as bound for the operator queue:
// the records of its FIFO message group after it may go on (walkUnit).
func (o *outcome) settled() bool {
	switch o.Kind {
	case KindProcessed, KindUnrecordedCompletion, KindDuplicate, KindAlreadyStarted, KindInProgressDropped:
		return true
	}
	return false
}

// retried: the record is listed in batchItemFailures, so SQS delivers it
// again. The others are deleted, a forwarded one once the operator queue
// holds it. A Kind nothing set is retried: a record is never deleted by
// default.
func (o *outcome) retried() bool { return !o.settled() && o.Kind != KindForwardedToOperator }

// retry is the outcome of a record reported failed for reason, err saying
// why when the reason does not, so SQS delivers it again.
func retry(reason Reason, err error) outcome {
	return outcome{Outcome: failedFor(reason, err)}
}

// notStarted are the outcomes of n records before any is started: a record
// that nothing reaches is reported failed, never deleted.
func notStarted(n int) []outcome {
	out := make([]outcome, n)
	for i := range out {
		out[i] = retry(ReasonNotStarted, nil)
	}
	return out
}

// Handle processes an SQS event for lambda.Start: each record under its
// key's lock, the records to retry in the partial batch response (the
// mapping needs ReportBatchItemFailures). A record's failure never fails
// the batch; its errors are ErrQueueLoop and ErrNoHandler.
func (p *Processor) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	if p.handler == nil && p.target == nil {
		return events.SQSEventResponse{}, ErrNoHandler
	}
	if err := p.checkSource(ev.Records); err != nil {
		p.log.ErrorContext(ctx, "invalid configuration; no record processed", "error", err)
		return events.SQSEventResponse{}, err
	}
	p.checkQueue(ctx)
	start := p.now()
	b := newBudget(ctx, start)
	ctx, cancel := b.context(ctx)
	defer cancel()
	recs := p.readKeys(ctx, ev.Records)
	var outcomes []outcome
	if p.target != nil {
		outcomes = p.deliver(ctx, b, recs)
	} else {
		outcomes = notStarted(len(recs))
		p.eachUnit(recs, func(unit []int) { p.runUnit(ctx, b, recs, unit, outcomes) })
	}
	p.forwardPermanent(ctx, ev.Records, outcomes)

	var resp events.SQSEventResponse
	for i := range outcomes {
		if outcomes[i].retried() {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: ev.Records[i].MessageId})
		}
	}
	p.delayRetries(ctx, ev.Records, outcomes)
	outs := make([]Outcome, len(outcomes))
	batchTook := p.now().Sub(start)
	for i := range outcomes {
		o := outcomes[i].Outcome
		o.Key, o.MessageID = recs[i].shown, ev.Records[i].MessageId
		if o.Duration == 0 {
			o.Duration = batchTook
		}
		outs[i] = o
	}
	p.emitMetrics(ctx, outs)
	p.tell(ctx, outs...)
	return resp, nil
}

// keyed is a record of the batch with its idempotency key read, and its
// logger carrying the message id and key. ok is false for a record without
// a key: it is retried, never run.
type keyed struct {
	msg events.SQSMessage
	key string
	// shown is the key as logs and outcomes show it (its hash with
	// HashKeys), "" without a key.
	shown string
	log   *slog.Logger
	ok    bool
	err   error // why it has no key
}

// readKeys reads every record's key once, before the batch is planned:
// copies of one key must be known to run them one after another.
func (p *Processor) readKeys(ctx context.Context, records []events.SQSMessage) []keyed {
	out := make([]keyed, len(records))
	for i, msg := range records {
		key, shown, log, err := p.key(ctx, msg)
		out[i] = keyed{msg: msg, key: key, shown: shown, log: log, ok: err == nil, err: err}
	}
	return out
}

// eachUnit runs fn for every unit of records (units), up to MaxConcurrency
// at once, and returns when all have returned.
func (p *Processor) eachUnit(recs []keyed, fn func(unit []int)) {
	sem := make(chan struct{}, p.cfg.MaxConcurrency)
	var wg sync.WaitGroup
	for _, unit := range units(recs) {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(unit)
		})
	}
	wg.Wait()
}

// units groups record indexes into units whose records run one after
// another, in batch order, while units run concurrently. Records share a
// unit when they are of one FIFO message group (its order is the queue's)
// or carry one key: copies of a key run in turn, so the second is a
// duplicate of the first (or runs if the first failed) instead of being
// refused as in progress by its own batch.
func units(recs []keyed) [][]int {
	parent := make([]int, len(recs))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	union := func(first map[string]int, name string, i int) {
		if j, ok := first[name]; ok {
			parent[find(i)] = find(j)
			return
		}
		first[name] = i
	}
	groups, keys := map[string]int{}, map[string]int{}
	for i, r := range recs {
		if g, ok := fifoGroup(r.msg); ok {
			union(groups, g, i)
		}
		if r.ok {
			union(keys, r.key, i)
		}
	}
	var out [][]int
	unit := map[int]int{} // root -> index in out
	for i := range recs {
		root := find(i)
		u, ok := unit[root]
		if !ok {
			u = len(out)
			unit[root] = u
			out = append(out, nil)
		}
		out[u] = append(out[u], i)
	}
	return out
}

// fifoGroup is the message group of a record from a FIFO queue.
func fifoGroup(msg events.SQSMessage) (string, bool) {
	if !strings.HasSuffix(msg.EventSourceARN, ".fifo") {
		return "", false
	}
	return msg.Attributes["MessageGroupId"], true
}

// runUnit processes a unit's records in order.
func (p *Processor) runUnit(ctx context.Context, b budget, recs []keyed, unit []int, outcomes []outcome) {
	p.walkUnit(ctx, b, recs, unit, outcomes, func(i int) bool {
		start := p.now()
		outcomes[i] = p.process(ctx, recs[i])
		outcomes[i].Duration = p.now().Sub(start)
		return outcomes[i].settled()
	})
}

// walkUnit calls step for a unit's records in order. After a record of a
// FIFO message group that did not go on (a failure), the group's later
// records are retried unprocessed: running them would break FIFO order.
// Other records go on. A record is not started inside the reserve kept for
// the batch's last calls; it keeps its outcome from notStarted, and SQS
// delivers it again.
func (p *Processor) walkUnit(ctx context.Context, b budget, recs []keyed, unit []int, outcomes []outcome, step func(i int) bool) {
	blocked := map[string]string{} // FIFO group -> the message id that blocks it
	for n, i := range unit {
		if left, ok := b.canStart(p.now()); !ok {
			for _, j := range unit[n:] {
				p.log.WarnContext(ctx, "record not started: the rest of the invocation is kept for the batch's last calls; retried later",
					"messageId", recs[j].msg.MessageId, "outcome", "not-started", "timeLeft", left.String(), "reserve", b.reserve.String())
			}
			return
		}
		group, fifo := fifoGroup(recs[i].msg)
		if by, ok := blocked[group]; fifo && ok {
			p.log.InfoContext(ctx, "record skipped", "messageId", recs[i].msg.MessageId, "outcome", "group-blocked", "blockedBy", by)
			outcomes[i] = retry(ReasonGroupBlocked, nil)
			continue
		}
		if !step(i) && fifo {
			blocked[group] = recs[i].msg.MessageId
		}
	}
}

func (p *Processor) process(ctx context.Context, r keyed) outcome {
	if !r.ok {
		return retry(ReasonNoKey, r.err)
	}
	res := p.lock.do(ctx, r.key, p.payloadHash(r.msg), 0, func(ctx context.Context) ([]byte, error) { return nil, p.handler(ctx, r.msg) })
	return p.judge(ctx, r.log, res)
}

// key reads msg's idempotency key, and returns the record's logger with it.
// A record without a key is logged and retried (err says why).
func (p *Processor) key(ctx context.Context, msg events.SQSMessage) (key, shown string, log *slog.Logger, _ error) {
	log = p.log.With("messageId", msg.MessageId, "receiveCount", msg.Attributes["ApproximateReceiveCount"])
	limit := maxKeyBytes
	if p.cfg.HashKeys {
		limit = 0
	}
	key, err := p.cfg.Key.keyOf(msg, p.cfg.setting("Key"), limit)
	if err != nil {
		log.ErrorContext(ctx, "record not processed: no idempotency key; it will be retried and reach the dead-letter queue",
			"outcome", "no-key", "error", err)
		return "", "", log, err
	}
	shown = p.lock.shownKey(key)
	return key, shown, log.With("key", shown), nil
}

// judge logs what the lock protocol did with a record and decides its
// fate: the record's Outcome (classify) with what only Handle adds applied
// to it, the operator queue, InProgress=drop and the hiding of a record
// refused as in progress.
func (p *Processor) judge(ctx context.Context, log *slog.Logger, res lockResult) outcome {
	o := outcome{Outcome: classify(res)}
	log = log.With("outcome", res.outcome.String())
	if res.fence > 0 {
		log = log.With("fence", res.fence)
	}
	switch res.outcome {
	case processed:
		msg := "record processed"
		if p.target != nil {
			msg = "record delivered to the target"
		}
		log.InfoContext(ctx, msg, "tookOver", res.tookOver)
	case processedUnrecorded:
		if errors.Is(res.err, ErrLockLost) {
			log.ErrorContext(ctx, "record processed after its lock expired and another holder took the key over: that holder runs it too (duplicate possible); raise "+p.cfg.setting("LockTimeout")+" or make the handler stop when its context ends",
				"error", res.err)
		} else {
			log.ErrorContext(ctx, "record processed but its completion was not recorded: a delivery of the same key after the lock expires would run it again (duplicate possible)",
				"error", res.err, "lockExpiresAt", res.lockExpiresAt)
		}
	case duplicate:
		log.InfoContext(ctx, "duplicate suppressed", "detail", res.err, "cached", res.cached)
	case payloadMismatch:
		if p.cfg.OperatorQueueURL != "" {
			log.ErrorContext(ctx, "record refused: its key was seen with another body (a producer reuses keys, or the key setting is too coarse); forwarding to the operator queue",
				"error", res.err)
			o.Kind = KindForwardedToOperator
			return o
		}
		log.ErrorContext(ctx, "record refused: its key was seen with another body (a producer reuses keys, or the key setting is too coarse); retried, and it reaches the dead-letter queue",
			"error", res.err)
	case inProgress:
		if p.cfg.InProgress == InProgressDrop {
			log.WarnContext(ctx, "record dropped: in progress elsewhere ("+p.cfg.setting("InProgress")+"=drop)", "detail", res.err)
			o.Kind = KindInProgressDropped
			return o
		}
		var held *store.HeldError
		if errors.As(res.err, &held) {
			o.hideUntil = held.Until()
		}
		log.InfoContext(ctx, "record in progress elsewhere; retried once the lock can be taken over", "detail", res.err)
	case failed:
		if res.lockLost {
			log.WarnContext(ctx, "record failed: its lock was lost before its work was recorded (taken over, or not renewed); retried later",
				"error", res.err)
			return o
		}
		if res.releaseErr != nil {
			log.WarnContext(ctx, "lock not released; it expires on its own", "error", res.releaseErr)
		}
		if errors.Is(res.err, ErrTargetRefused) && p.cfg.OperatorQueueURL != "" {
			log.ErrorContext(ctx, "record refused by the target for good; forwarding to the operator queue", "error", res.err)
			o.Kind, o.Reason = KindForwardedToOperator, ReasonTargetRefused
			return o
		}
		if IsPermanent(res.err) && p.cfg.OperatorQueueURL != "" {
			log.WarnContext(ctx, "record failed permanently; forwarding to the operator queue", "error", res.err)
			o.Kind, o.Reason = KindForwardedToOperator, ReasonPermanent
			return o
		}
		permanent := IsPermanent(res.err) || errors.Is(res.err, ErrTargetRefused)
		if pe, ok := res.err.(*PanicError); ok {
			// run returns a panic as it is: the stack in a field of its
			// own, not escaped into the error's one line.
			log.WarnContext(ctx, "record failed; retried later", "error", res.err, "permanent", permanent, "stack", string(pe.Stack))
		} else {
			log.WarnContext(ctx, "record failed; retried later", "error", res.err, "permanent", permanent)
		}
	case emitPending:
		log.ErrorContext(ctx, "record's work is committed but its emitted messages are not all sent; retried, and the retry sends them (the work does not run again)",
			"error", res.err)
	case uncommitted:
		if o.Reason == ReasonCommitUnknown {
			log.ErrorContext(ctx, "record's completion has an unknown outcome (its transaction, or the completion that carries its emitted messages): the store's answer was lost and the record could not be read to settle it; its lock is kept until it expires, then the next delivery finds it completed (a duplicate, its messages sent) or runs the work again, its effect applied and its messages sent once either way",
				"error", res.err)
			return o
		}
		log.ErrorContext(ctx, "record's transaction not committed: nothing of its effect is applied; retried later",
			"error", res.err)
	default:
		if o.Reason == ReasonStoreMisconfigured {
			log.ErrorContext(ctx, "record not processed: idempotency store misconfigured; check "+p.cfg.storeSetting()+", "+p.cfg.setting("KeyPrefix")+" and the function's permissions",
				"error", res.err)
			return o
		}
		log.ErrorContext(ctx, "record not processed: idempotency store unavailable; retried later", "error", res.err)
		if res.releaseErr != nil {
			log.WarnContext(ctx, "a lock the failed acquire may have taken could not be released; if it was taken, it expires on its own", "error", res.releaseErr)
		}
	}
	return o
}

// payloadHash is the SHA-256 of the body when payloads are validated.
func (p *Processor) payloadHash(msg events.SQSMessage) string {
	if !p.cfg.ValidatePayload {
		return ""
	}
	return bodyHash(msg.Body)
}

// Key is the idempotency key a Handler or Do's function runs for ("" outside
// one; sqsoncetest.Context sets it).
func Key(ctx context.Context) string { return leasectx.From(ctx).Key }

// Fence is the fencing token of the lock a Handler or Do's function runs
// under (0 outside one), larger than every earlier lock's of the key: a
// downstream that refuses a lower token than one it has seen refuses a
// holder whose lock was taken over (docs/guarantees.md).
func Fence(ctx context.Context) int64 { return leasectx.From(ctx).Fence }
