package sqsonce

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/keyprefix"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
)

// InProgressPolicy is what Handle does with a record whose key another
// holder is processing right now.
type InProgressPolicy string

const (
	// InProgressRetry reports the record failed, hidden until the other
	// holder's lock can be taken over (with ConsumerConfig.AWS; else the
	// queue's visibility timeout decides), so a dead holder's key is taken.
	InProgressRetry InProgressPolicy = "retry"
	// InProgressDrop reports it done: lost if the other holder then fails.
	InProgressDrop InProgressPolicy = "drop"
)

// ConsumerConfig configures the SQS batch consumer NewConsumer builds: the
// lock's Config and what only Handle uses. Zero values are the defaults; a
// field's comment names its environment variable (docs/configuration.md;
// docs/processor.md explains them).
type ConsumerConfig struct {
	Config
	// Key says where a record's key comes from (IDEMPOTENCY_KEY). Zero:
	// KeyFromMessageID().
	Key KeySource
	// InProgress is InProgressRetry (the default) or InProgressDrop
	// (IN_PROGRESS).
	InProgress InProgressPolicy
	// MaxConcurrency bounds the records of a batch processed at once
	// (MAX_CONCURRENCY, at most 1000; a FIFO message group runs in order).
	// Zero: 10.
	MaxConcurrency int
	// FailureBackoffBase, when set, hides a failed record for a jittered
	// FailureBackoffBase × 2^receives, except on its last receive
	// (FAILURE_BACKOFF_BASE).
	FailureBackoffBase time.Duration
	// OperatorQueueURL receives Permanent failures, payload mismatches and
	// records a Target refused (OPERATOR_QUEUE_URL). Empty: they are retried.
	OperatorQueueURL string
	// ValidatePayload keeps a hash of each body with its key, so another
	// body under a seen key is a conflict (ReasonPayloadMismatch), not a
	// duplicate (PAYLOAD_VALIDATION=on).
	ValidatePayload bool
	// Target, when set, receives the records instead of a Handler (TARGET,
	// read by targets.FromEnv); package sqsonce/targets builds one.
	Target Target
	// QueueURL is the consumed queue (QUEUE_URL): its settings are checked
	// once per process, and its maxReceiveCount read for FailureBackoffBase.
	QueueURL string
	// AWS is the SDK configuration for SQS calls: required with
	// OperatorQueueURL, FailureBackoffBase or QueueURL; it also hides a
	// record refused as in progress. Zero: no SQS call.
	AWS aws.Config
	// Metrics, when set, receives each Handle's metrics in CloudWatch's
	// embedded metric format (docs/metrics.md): os.Stdout in Lambda, as
	// FromEnv sets. Nil: none.
	Metrics io.Writer
	// FunctionName is the metrics' FunctionName dimension
	// (AWS_LAMBDA_FUNCTION_NAME). Empty: KeyPrefix.
	FunctionName string
}

// check fills in the zero values and refuses what cannot work, the lock's
// fields and the consumer's, naming every bad field.
func (c ConsumerConfig) check(hasHandler bool) (ConsumerConfig, error) {
	var bad badField
	c.Config = c.Config.check(&bad)
	if c.WaitInProgress != 0 {
		bad.add("WaitInProgress", "%v: Handle does not wait for another holder; it retries the record (%s). Set it only for New (Do and DoResult)", c.WaitInProgress, c.setting("InProgress"))
	}
	if c.Key.err != nil {
		bad.add("Key", "%s: %v", c.Key, c.Key.err)
	}
	switch c.InProgress {
	case "":
		c.InProgress = InProgressRetry
	case InProgressRetry, InProgressDrop:
	default:
		bad.add("InProgress", "%q is not %q or %q", c.InProgress, InProgressRetry, InProgressDrop)
	}
	switch {
	case c.MaxConcurrency < 0 || c.MaxConcurrency > maxConcurrency:
		bad.add("MaxConcurrency", "%d is not from 0 (%d) to %d", c.MaxConcurrency, defaultConcurrent, maxConcurrency)
	case c.MaxConcurrency == 0:
		c.MaxConcurrency = defaultConcurrent
	}
	if c.FailureBackoffBase < 0 || c.FailureBackoffBase > maxVisibility {
		bad.add("FailureBackoffBase", "%v is not from 0 to %v", c.FailureBackoffBase, maxVisibility)
	}
	if c.Target != nil && hasHandler {
		bad.add("Target", "set together with a Handler: choose one (pass a nil Handler)")
	}
	if c.needsSQS() && c.AWS.Region == "" && c.AWS.BaseEndpoint == nil {
		bad.add("AWS", "no region: load it with config.LoadDefaultConfig")
	}
	if c.FunctionName == "" {
		c.FunctionName = c.KeyPrefix
	}
	return c, errors.Join(bad...)
}

// needsSQS reports whether the processor calls SQS: forwards to the
// operator queue, failure backoff, the consumed queue's check.
func (c *ConsumerConfig) needsSQS() bool {
	return c.OperatorQueueURL != "" || c.FailureBackoffBase > 0 || c.QueueURL != ""
}

// ConfigFromEnv reads the variables of ConsumerConfig's fields and its
// Config's through lookup (os.LookupEnv, or a map's in a test), for a
// program that sets more before NewConsumer. TARGET is read by
// targets.FromEnv, so a program without a target links none of their
// clients. Errors name the variables, every bad one at once.
func ConfigFromEnv(lookup func(name string) (string, bool)) (ConsumerConfig, error) {
	r := envconfig.NewReader(lookup)
	c := ConsumerConfig{
		Config: Config{
			LockTimeout:  r.Seconds("LOCK_TIMEOUT", 0, time.Second, maxLockTimeout),
			DedupeWindow: r.Seconds("DEDUPE_WINDOW", defaultDedupeWindow, time.Second, maxDedupeWindow),
			LocalCache:   r.Int("LOCAL_CACHE", 0, 0, maxLocalCache),
			HashKeys:     r.OneOf("HASH_KEYS", "off", "on", "off") == "on",
			fromEnv:      true,
		},
		FunctionName:       r.String("AWS_LAMBDA_FUNCTION_NAME", ""),
		InProgress:         InProgressPolicy(r.OneOf("IN_PROGRESS", string(InProgressRetry), string(InProgressRetry), string(InProgressDrop))),
		MaxConcurrency:     r.Int("MAX_CONCURRENCY", defaultConcurrent, 1, maxConcurrency),
		FailureBackoffBase: r.Seconds("FAILURE_BACKOFF_BASE", 0, time.Second, maxVisibility),
		OperatorQueueURL:   r.QueueURL("OPERATOR_QUEUE_URL", false),
		ValidatePayload:    r.OneOf("PAYLOAD_VALIDATION", "off", "on", "off") == "on",
		QueueURL:           r.QueueURL("QUEUE_URL", false),
	}
	c.KeyPrefix = r.String("KEY_PREFIX", c.FunctionName)
	if c.KeyPrefix == "" {
		r.Fail("KEY_PREFIX", "not set, and AWS_LAMBDA_FUNCTION_NAME (its default) is not set either")
	} else if err := keyprefix.Check(c.KeyPrefix); err != nil {
		r.Fail("KEY_PREFIX", "%v", err)
	}
	key, err := parseKeySource(r.String("IDEMPOTENCY_KEY", "messageId"))
	if err != nil {
		r.Fail("IDEMPOTENCY_KEY", "%v", err)
	}
	c.Key = key
	return c, r.Err()
}

// FromEnv is NewConsumer on the deployed function's variables
// (ConfigFromEnv), with metrics on standard output. base gives what no
// variable names: Store (required), AWS, and when set Target, Logger,
// OnOutcome, Metrics and Test. TARGET set without base.Target is an error:
// build it with package sqsonce/targets, as cmd/processor does, and pass a
// nil h. Errors name the variables, every bad one at once.
func FromEnv(lookup func(name string) (string, bool), base ConsumerConfig, h Handler) (*Processor, error) {
	cfg, err := ConfigFromEnv(lookup)
	if t, ok := lookup("TARGET"); ok && t != "" && base.Target == nil {
		err = errors.Join(err, fmt.Errorf("sqsonce: environment variable TARGET is set (%q), but FromEnv was given no Target: unset it, or build the target with package sqsonce/targets as cmd/processor does", t))
	}
	if err != nil {
		return nil, err
	}
	cfg.Store, cfg.AWS, cfg.Target = base.Store, base.AWS, base.Target
	cfg.Logger, cfg.OnOutcome, cfg.WaitInProgress = base.Logger, base.OnOutcome, base.WaitInProgress
	cfg.Test = base.Test
	cfg.Metrics = base.Metrics
	if cfg.Metrics == nil {
		cfg.Metrics = os.Stdout
	}
	return NewConsumer(cfg, h)
}

// ErrQueueLoop: the operator queue, or an sqs Target, is the queue being
// consumed, so its records would come back for ever.
var ErrQueueLoop = errors.New("sqsonce: a destination is the queue being consumed")

// checkSource refuses an event from the operator queue itself, or from the
// queue a Target sends to. Only the event names the queue being consumed,
// so this cannot be checked in NewConsumer.
func (p *Processor) checkSource(records []events.SQSMessage) error {
	if sc, ok := p.target.(sourceChecker); ok {
		for _, rec := range records {
			if err := sc.CheckSource(rec.EventSourceARN); err != nil {
				return fmt.Errorf("%w: %s: %w; every message would loop for ever: point %s at another queue", ErrQueueLoop, p.cfg.setting("Target"), err, p.cfg.setting("Target"))
			}
		}
	}
	if p.cfg.OperatorQueueURL == "" {
		return nil
	}
	for _, rec := range records {
		if sqsmsg.SameQueue(p.cfg.OperatorQueueURL, rec.EventSourceARN) {
			return fmt.Errorf("%w: %s (%s) is %s: permanent failures would loop for ever; point it at a queue of its own",
				ErrQueueLoop, p.cfg.setting("OperatorQueueURL"), p.cfg.OperatorQueueURL, rec.EventSourceARN)
		}
	}
	return nil
}
