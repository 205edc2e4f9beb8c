package sqsonce

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/keyprefix"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// InProgressPolicy is what Handle does with a message whose key another
// holder is processing right now.
type InProgressPolicy string

const (
	// InProgressRetry reports the message failed, so SQS delivers it again
	// later: it is hidden until the other holder's lock can be taken over,
	// plus jitter, so the redelivery takes the lock over if that holder died
	// (without an AWS configuration, the queue's visibility timeout decides).
	InProgressRetry InProgressPolicy = "retry"
	// InProgressDrop reports it done. If the other holder then fails, the
	// message is lost: choose it only where a lost message is acceptable.
	InProgressDrop InProgressPolicy = "drop"
)

// Config configures a Processor. Zero values mean the documented defaults.
// Each field's comment names the environment variable ConfigFromEnv reads
// it from; the docs' configuration reference lists them all.
type Config struct {
	// Store keeps the lock records (STORE, read with the store's own
	// variables by the processor): dynamostore.New or dynamostore.FromEnv
	// (a DynamoDB table), redisstore.New (Redis); tests pass
	// sqsoncetest.NewStore(). Required.
	Store store.Store
	// KeyPrefix starts every record id, "<prefix>#<key>", so consumers can
	// share a table (KEY_PREFIX, default AWS_LAMBDA_FUNCTION_NAME).
	// Required: at most 128 bytes of UTF-8, without '#', spaces, control or
	// invisible characters.
	KeyPrefix string
	// Key says where a message's key comes from (IDEMPOTENCY_KEY). Zero:
	// KeyFromMessageID().
	Key KeySource
	// LockTimeout is how long a lock lasts before another holder may take
	// it over (LOCK_TIMEOUT); it is renewed every third of it while the
	// handler runs. Zero: until the invocation's deadline plus 5 s, not
	// renewed; under a context without a deadline (Do in a job or a
	// server), 30 seconds, renewed every 10 seconds while the function runs,
	// so a process killed inside it frees its key within 30 seconds. At
	// most 12 hours.
	LockTimeout time.Duration
	// DedupeWindow is how long a completed key suppresses duplicates
	// (DEDUPE_WINDOW). Zero: 24 hours. At most 366 days.
	DedupeWindow time.Duration
	// InProgress is InProgressRetry (the default) or InProgressDrop
	// (IN_PROGRESS).
	InProgress InProgressPolicy
	// MaxConcurrency bounds the records of one batch processed at once
	// (MAX_CONCURRENCY). Zero: 10. At most 1000. A FIFO message group runs
	// in order.
	MaxConcurrency int
	// FailureBackoffBase, when set, hides a failed message for a jittered
	// FailureBackoffBase × 2^receives (FAILURE_BACKOFF_BASE). With QueueURL,
	// a failure on the last receive the queue's redrive policy allows is
	// not delayed: the next receive moves the message to the dead-letter
	// queue.
	FailureBackoffBase time.Duration
	// OperatorQueueURL receives Permanent failures, payload mismatches and
	// messages a Target refused (OPERATOR_QUEUE_URL). Empty: they are
	// retried like any failure.
	OperatorQueueURL string
	// ValidatePayload keeps a hash of each message body with its key, so a
	// later message with the same key and another body is a conflict sent
	// to the operator queue with reason payload-mismatch, never dropped as a
	// duplicate (PAYLOAD_VALIDATION=on). The hash is of the body's bytes: a
	// re-send with other white space or member order is a conflict too.
	ValidatePayload bool
	// LocalCache is how many completed keys the process remembers, to answer
	// a repeated duplicate with no store call (LOCAL_CACHE). Zero: off. At
	// most 1,000,000. A record deleted by hand is still a duplicate here
	// until its window ends. It keeps DoResult's stored results too: its
	// memory is at most this many of them.
	LocalCache int
	// HashKeys stores and shows the SHA-256 of each key (HashKey) instead
	// of the key (HASH_KEYS=on): record ids are "<prefix>#<hash>", and logs,
	// metrics and Outcome carry the hash, so order ids or e-mail addresses
	// stay out of the table and the logs; keys may then be longer than
	// 1024 bytes. Changing it on a live table starts every key afresh (its
	// old record is under the other id): switch it only with a new
	// KeyPrefix, or when no duplicate is expected within DedupeWindow. The
	// CLI's inspect, release and forget take the plain key with --hash-keys.
	HashKeys bool
	// WaitInProgress is how long Do and DoResult wait when another holder
	// has the key's live lock (zero: no wait, ErrInProgress at once). The
	// record is re-read at growing, jittered intervals (50 ms doubling to 1
	// s); when the holder completes, the call returns its outcome (DoResult:
	// its stored result); when it releases or its lock expires, the call
	// takes the lock and runs its function. Bounded by the context too. At
	// most 15 minutes. Handle does not wait: a record in progress is retried
	// (InProgress).
	WaitInProgress time.Duration
	// OnOutcome, when set, is called once per record at the end of Handle,
	// and once per Do or DoResult, with what happened (Outcome); the
	// metrics are counted from the same Outcomes. It runs on the calling
	// goroutine and delays the caller as long as it runs: keep it short.
	// Concurrent calls of Handle or Do call it concurrently.
	OnOutcome func(context.Context, Outcome)
	// Target, when set, receives the records instead of a Handler (TARGET,
	// read by targets.FromEnv): package sqsonce/targets delivers to an
	// existing Lambda function, queue, topic or bus. A record is completed
	// once the target accepted it. New refuses a Target with a Handler.
	Target Target
	// QueueURL is the queue the function consumes (QUEUE_URL). When set, the
	// first event of each execution environment reads the queue's settings
	// (sqs:GetQueueAttributes) and logs one warning if they are unsafe: a
	// visibility timeout under 6 × the function's timeout, no redrive
	// policy, a retention shorter than the receives before the DLQ. The
	// redrive policy's maxReceiveCount it reads there tells
	// FailureBackoffBase which receive is the last.
	QueueURL string
	// AWS is the SDK configuration, as config.LoadDefaultConfig returns it,
	// for SQS: the operator queue, the failure backoff, the queue check, and
	// hiding a record refused as in progress until the lock that refused it
	// can be taken over. Required with OperatorQueueURL, FailureBackoffBase
	// or QueueURL; without it (a test on sqsoncetest's store) no SQS call is
	// made.
	AWS aws.Config
	// Logger receives one line per record. Nil: slog.Default() as it is
	// when New is called (set your default logger first).
	Logger *slog.Logger
	// Metrics, when set, receives the processor's metrics at the end of
	// each Handle: CloudWatch Embedded Metric Format lines (namespace
	// sqs-once, dimension FunctionName) that CloudWatch Logs turns into
	// metrics with no API call. Pass os.Stdout in a Lambda function, as
	// FromEnv does. Nil: no metrics. Do writes none.
	Metrics io.Writer
	// FunctionName is the Lambda function this runs as
	// (AWS_LAMBDA_FUNCTION_NAME, which Lambda sets): the metrics'
	// FunctionName dimension. Empty: KeyPrefix.
	FunctionName string
	// Now is the clock. Nil: time.Now. A test that moves time passes its
	// own, such as memstore.Store's Now (sqsoncetest.NewStore).
	Now func() time.Time
	// Rand returns uniform values in [0, 1) for the failure backoff's
	// jitter. Nil: math/rand/v2. A test or a reproducible run seeds its own.
	Rand func() float64

	// fromEnv is set by ConfigFromEnv: errors and log hints then name the
	// environment variables, not the fields.
	fromEnv bool
}

// Limits of the configuration, in one place: New and ConfigFromEnv refuse
// values outside them, and the docs' configuration reference states them.
const (
	maxLockTimeout    = 12 * time.Hour
	maxDedupeWindow   = 366 * 24 * time.Hour
	maxConcurrency    = 1000
	maxLocalCache     = 1_000_000
	maxKeyBytes       = 1024
	maxWait           = 15 * time.Minute
	defaultConcurrent = 10
)

// variables names the environment variable of each Config field.
var variables = map[string]string{
	"KeyPrefix":          "KEY_PREFIX",
	"Key":                "IDEMPOTENCY_KEY",
	"LockTimeout":        "LOCK_TIMEOUT",
	"DedupeWindow":       "DEDUPE_WINDOW",
	"InProgress":         "IN_PROGRESS",
	"MaxConcurrency":     "MAX_CONCURRENCY",
	"FailureBackoffBase": "FAILURE_BACKOFF_BASE",
	"OperatorQueueURL":   "OPERATOR_QUEUE_URL",
	"ValidatePayload":    "PAYLOAD_VALIDATION",
	"LocalCache":         "LOCAL_CACHE",
	"Target":             "TARGET",
	"QueueURL":           "QUEUE_URL",
	"FunctionName":       "AWS_LAMBDA_FUNCTION_NAME",
	"HashKeys":           "HASH_KEYS",
	// Read by internal/storeenv for cmd/processor, not ConfigFromEnv.
	"Store": "STORE",
}

// setting is how an error or log line names field: its variable when the
// configuration came from the environment, "Config.<field>" otherwise.
func (c *Config) setting(field string) string {
	if v, ok := variables[field]; ok && c.fromEnv {
		return v
	}
	return "Config." + field
}

// storeSetting names what configures the store, for a hint in the log: the
// table's variable when the configuration came from the environment (the
// deployed function's store is DynamoDB unless STORE says otherwise).
func (c *Config) storeSetting() string {
	if c.fromEnv {
		return "IDEMPOTENCY_TABLE (or STORE's server), its key schema (id, string)"
	}
	return "Config.Store (its table and key schema (id, string), or its server)"
}

// ConfigError is a Config field that cannot work.
type ConfigError struct {
	Field string
	Msg   string
}

// Error describes the failure in one line.
func (e *ConfigError) Error() string { return "sqsonce: invalid Config." + e.Field + ": " + e.Msg }

// check fills in the zero values and refuses what cannot work, naming every
// bad field: a library user gets an error, never a panic or a hang. The
// environment's errors are these, renamed (ConfigFromEnv).
func (c Config) check(hasHandler bool) (Config, error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if c.Store == nil {
		bad("Store", "nil: give the store that keeps the lock records (dynamostore.New for a DynamoDB table, sqsoncetest.NewStore in a test)")
	}
	if c.KeyPrefix == "" {
		bad("KeyPrefix", "empty: record ids are <prefix>#<key>, and the prefix keeps consumers of one table apart")
	} else if err := keyprefix.Check(c.KeyPrefix); err != nil {
		bad("KeyPrefix", "%v", err)
	}
	if c.Key.err != nil {
		bad("Key", "%s: %v", c.Key, c.Key.err)
	}
	if c.LockTimeout < 0 || c.LockTimeout > maxLockTimeout {
		bad("LockTimeout", "%v is not from 0 (until the invocation's deadline) to %v", c.LockTimeout, maxLockTimeout)
	}
	switch {
	case c.DedupeWindow < 0 || c.DedupeWindow > maxDedupeWindow:
		bad("DedupeWindow", "%v is not from 0 (%v) to %v", c.DedupeWindow, DefaultDedupeWindow, maxDedupeWindow)
	case c.DedupeWindow == 0:
		c.DedupeWindow = DefaultDedupeWindow
	}
	switch c.InProgress {
	case "":
		c.InProgress = InProgressRetry
	case InProgressRetry, InProgressDrop:
	default:
		bad("InProgress", "%q is not %q or %q", c.InProgress, InProgressRetry, InProgressDrop)
	}
	switch {
	case c.MaxConcurrency < 0 || c.MaxConcurrency > maxConcurrency:
		bad("MaxConcurrency", "%d is not from 0 (%d) to %d", c.MaxConcurrency, defaultConcurrent, maxConcurrency)
	case c.MaxConcurrency == 0:
		c.MaxConcurrency = defaultConcurrent
	}
	if c.LocalCache < 0 || c.LocalCache > maxLocalCache {
		bad("LocalCache", "%d is not from 0 to %d", c.LocalCache, maxLocalCache)
	}
	if c.WaitInProgress < 0 || c.WaitInProgress > maxWait {
		bad("WaitInProgress", "%v is not from 0 (no wait) to %v", c.WaitInProgress, maxWait)
	}
	if c.FailureBackoffBase < 0 || c.FailureBackoffBase > maxVisibility {
		bad("FailureBackoffBase", "%v is not from 0 to %v", c.FailureBackoffBase, maxVisibility)
	}
	if c.Target != nil && hasHandler {
		bad("Target", "set together with a Handler: choose one (pass a nil Handler)")
	}
	if c.needsAWS() && c.AWS.Region == "" && c.AWS.BaseEndpoint == nil {
		bad("AWS", "no region: load it with config.LoadDefaultConfig")
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.FunctionName == "" {
		c.FunctionName = c.KeyPrefix
	}
	return c, errors.Join(errs...)
}

// needsAWS reports whether the configuration makes AWS calls: SQS.
func (c *Config) needsAWS() bool { return c.needsSQS() }

// needsSQS reports whether the processor calls SQS: forwards to the
// operator queue, failure backoff, the consumed queue's check.
func (c *Config) needsSQS() bool {
	return c.OperatorQueueURL != "" || c.FailureBackoffBase > 0 || c.QueueURL != ""
}

// ConfigFromEnv reads the environment variables of Config's fields through
// lookup (os.LookupEnv, or a map's in tests), for a program that sets more
// (a Logger, a KeyFunc, a Target, its own AWS configuration) before calling
// New. KEY_PREFIX defaults to AWS_LAMBDA_FUNCTION_NAME. TARGET is read by
// targets.FromEnv, so that a program without a target links none of the
// targets' clients. Errors name the variables, every bad one at once.
func ConfigFromEnv(lookup func(name string) (string, bool)) (Config, error) {
	r := envconfig.NewReader(lookup)
	c := Config{
		FunctionName:       r.String("AWS_LAMBDA_FUNCTION_NAME", ""),
		LockTimeout:        r.Seconds("LOCK_TIMEOUT", 0, time.Second, maxLockTimeout),
		DedupeWindow:       r.Seconds("DEDUPE_WINDOW", DefaultDedupeWindow, time.Second, maxDedupeWindow),
		InProgress:         InProgressPolicy(r.OneOf("IN_PROGRESS", string(InProgressRetry), string(InProgressRetry), string(InProgressDrop))),
		MaxConcurrency:     r.Int("MAX_CONCURRENCY", defaultConcurrent, 1, maxConcurrency),
		FailureBackoffBase: r.Seconds("FAILURE_BACKOFF_BASE", 0, time.Second, maxVisibility),
		OperatorQueueURL:   r.QueueURL("OPERATOR_QUEUE_URL", false),
		ValidatePayload:    r.OneOf("PAYLOAD_VALIDATION", "off", "on", "off") == "on",
		LocalCache:         r.Int("LOCAL_CACHE", 0, 0, maxLocalCache),
		QueueURL:           r.QueueURL("QUEUE_URL", false),
		HashKeys:           r.OneOf("HASH_KEYS", "off", "on", "off") == "on",
		fromEnv:            true,
	}
	c.KeyPrefix = r.String("KEY_PREFIX", c.FunctionName)
	if c.KeyPrefix == "" {
		r.Fail("KEY_PREFIX", "not set, and AWS_LAMBDA_FUNCTION_NAME (its default) is not set either")
	} else if err := keyprefix.Check(c.KeyPrefix); err != nil {
		r.Fail("KEY_PREFIX", "%v", err)
	}
	key, err := ParseKeySource(r.String("IDEMPOTENCY_KEY", "messageId"))
	if err != nil {
		r.Fail("IDEMPOTENCY_KEY", "%v", err)
	}
	c.Key = key
	return c, r.Err()
}

// FromEnv builds a Processor for h from the environment variables the
// deployed function reads (ConfigFromEnv, through lookup: os.LookupEnv, or
// a map's in a test), with metrics on standard output as the deployed
// function writes them. base gives what no variable names: the Store
// (required: dynamostore.FromEnv builds the DynamoDB store from
// IDEMPOTENCY_TABLE), the AWS configuration (config.LoadDefaultConfig's),
// and, when set, Target, Logger, OnOutcome, WaitInProgress, Now and Rand;
// its other fields are the variables'. An invalid variable is an error
// naming it, every bad one at once. TARGET set without base.Target is an
// error: build the target with package sqsonce/targets, as cmd/processor
// does, and pass a nil h.
func FromEnv(lookup func(name string) (string, bool), base Config, h Handler) (*Processor, error) {
	cfg, err := ConfigFromEnv(lookup)
	if t, ok := lookup("TARGET"); ok && t != "" && base.Target == nil {
		err = errors.Join(err, fmt.Errorf("sqsonce: environment variable TARGET is set (%q), but FromEnv was given no Target: unset it, or build the target with package sqsonce/targets as cmd/processor does", t))
	}
	if err != nil {
		return nil, err
	}
	cfg.Store, cfg.AWS, cfg.Target = base.Store, base.AWS, base.Target
	cfg.Logger, cfg.OnOutcome, cfg.WaitInProgress = base.Logger, base.OnOutcome, base.WaitInProgress
	cfg.Now, cfg.Rand = base.Now, base.Rand
	cfg.Metrics = base.Metrics
	if cfg.Metrics == nil {
		cfg.Metrics = os.Stdout
	}
	return New(cfg, h)
}

// envError renames a ConfigError to its environment variable, for a
// Config that came from ConfigFromEnv.
func (c *Config) envError(err error) error {
	if !c.fromEnv || err == nil {
		return err
	}
	var errs []error
	for _, e := range unjoin(err) {
		var ce *ConfigError
		if errors.As(e, &ce) {
			if v, ok := variables[ce.Field]; ok {
				e = &envconfig.VarError{Name: v, Msg: ce.Msg}
			}
		}
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// ErrQueueLoop: the operator queue, or an sqs Target, is the queue being
// consumed, so its messages would come back to the processor for ever.
var ErrQueueLoop = errors.New("sqsonce: a destination is the queue being consumed")

// checkSource refuses an event from the operator queue itself, or from the
// queue a Target sends to. Only the event names the queue being consumed,
// so this cannot be checked in New.
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
