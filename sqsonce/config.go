package sqsonce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/keyprefix"
	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// Config is the lock's configuration, which Do, DoResult and Handle share:
// New takes it alone, NewConsumer inside a ConsumerConfig. Zero values are
// the defaults. A field's comment names the environment variable
// ConfigFromEnv reads it from; docs/configuration.md lists them with their
// limits, docs/library.md explains them.
type Config struct {
	// Store keeps the lock records (STORE): dynamostore.FromEnv or
	// dynamostore.New, redisstore.New, pgstore.New; for exactly-once
	// effects a store.Transactor (dynamostore.NewTransactional, pgstore.New);
	// a test passes sqsoncetest.NewStore() or memstore.New(). Required.
	Store store.Store
	// KeyPrefix starts every record id, "<prefix>#<key>", so consumers can
	// share a table (KEY_PREFIX, default AWS_LAMBDA_FUNCTION_NAME). Required:
	// at most 128 bytes of UTF-8, no '#', spaces, control or invisible
	// characters.
	KeyPrefix string
	// LockTimeout is how long a lock lasts before another holder may take
	// it over (LOCK_TIMEOUT, at most 12 hours), renewed every third of it
	// while the function runs. Zero: the context's deadline plus 5 s, not
	// renewed; without a deadline, 30 seconds renewed every 10.
	LockTimeout time.Duration
	// DedupeWindow is how long a completed key suppresses duplicates
	// (DEDUPE_WINDOW, at most 366 days). Zero: 24 hours.
	DedupeWindow time.Duration
	// LocalCache is how many completed keys, and DoResult's results, the
	// process remembers to answer a repeated duplicate with no store call
	// (LOCAL_CACHE, at most 1,000,000). Zero: off.
	LocalCache int
	// HashKeys stores and shows HashKey(key) instead of the key, and lifts
	// the 1024-byte key limit (HASH_KEYS=on). Switching it starts every key
	// afresh (docs/library.md, "Hashed keys").
	HashKeys bool
	// WaitInProgress is how long Do and DoResult wait for another holder of
	// the key (at most 15 minutes; docs/library.md, "Waiting for a call in
	// flight"). Zero: ErrInProgress at once. NewConsumer refuses it: Handle
	// does not wait, it retries the record (ConsumerConfig.InProgress).
	WaitInProgress time.Duration
	// PermanentEffect, when set, says whether a transaction refused by a
	// condition of the work's own writes is a failure no retry fixes (an
	// order already cancelled): a *store.EffectError arises at the commit,
	// after the work returned, so the work cannot mark it Permanent
	// itself. True makes it Permanent, the lock released: Handle forwards
	// the record to ConsumerConfig.OperatorQueueURL at once, Do and
	// DoResult return it marked (IsPermanent; errors.As still finds the
	// *store.EffectError and the store's detail: on DynamoDB the
	// *types.TransactionCanceledException and its CancellationReasons, on
	// PostgreSQL the *pgconn.PgError and its ConstraintName). Nil, or
	// false: the refusal is retried like any failure of the work. It is
	// asked only on a store.Transactor.
	PermanentEffect func(*store.EffectError) bool
	// Sender sends the messages a work emits (Emit) once its completion is
	// committed: targets.NewSender(awsCfg) on AWS. Nil: Emit refuses, and a
	// completion found with messages pending is retried (emit-pending).
	Sender Sender
	// OnOutcome, when set, receives every Outcome: once per record at the
	// end of Handle, once per Do or DoResult, on the calling goroutine.
	OnOutcome func(context.Context, Outcome)
	// Logger receives one line per record. Nil: slog.Default() when the
	// Processor is built.
	Logger *slog.Logger
	// Test holds a test's hooks; production code leaves it zero.
	Test TestConfig

	// fromEnv is set by ConfigFromEnv: errors and log hints then name the
	// environment variables, not the fields.
	fromEnv bool
}

// TestConfig holds the hooks a test sets to control time and chance.
type TestConfig struct {
	// Now is the clock. Nil: time.Now. A test that moves time passes the
	// store's, such as sqsoncetest.NewStore().Now.
	Now func() time.Time
	// Rand returns uniform values in [0, 1) for every jitter. Nil:
	// math/rand/v2.
	Rand func() float64
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

// variables names the environment variable of each field of Config and
// ConsumerConfig.
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

// consumerFields are the fields of ConsumerConfig: an error names them
// "ConsumerConfig.<field>", the others "Config.<field>".
var consumerFields = map[string]bool{
	"Key": true, "InProgress": true, "MaxConcurrency": true, "FailureBackoffBase": true,
	"OperatorQueueURL": true, "ValidatePayload": true, "Target": true, "QueueURL": true,
	"AWS": true, "Metrics": true, "FunctionName": true,
}

// fieldName is a field as a Go caller spells it.
func fieldName(field string) string {
	if consumerFields[field] {
		return "ConsumerConfig." + field
	}
	return "Config." + field
}

// setting is how an error or log line names field: its variable when the
// configuration came from the environment, the field otherwise.
func (c *Config) setting(field string) string {
	if v, ok := variables[field]; ok && c.fromEnv {
		return v
	}
	return fieldName(field)
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

// ConfigError is a field of Config or ConsumerConfig that cannot work.
type ConfigError struct {
	// Field is the field's name, such as "KeyPrefix".
	Field string
	// Msg says why the field cannot work.
	Msg string
}

// Error describes the failure in one line.
func (e *ConfigError) Error() string { return "sqsonce: invalid " + fieldName(e.Field) + ": " + e.Msg }

// badField collects the errors of a check, one per bad field.
type badField []error

func (b *badField) add(field, format string, args ...any) {
	*b = append(*b, &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)})
}

// check fills in the zero values and refuses what cannot work, naming every
// bad field: a library user gets an error, never a panic or a hang. The
// environment's errors are these, renamed (envError).
func (c Config) check(bad *badField) Config {
	if c.Store == nil {
		bad.add("Store", "nil: give the store that keeps the lock records (dynamostore.New for a DynamoDB table, sqsoncetest.NewStore in a test)")
	}
	if c.KeyPrefix == "" {
		bad.add("KeyPrefix", "empty: record ids are <prefix>#<key>, and the prefix keeps consumers of one table apart")
	} else if err := keyprefix.Check(c.KeyPrefix); err != nil {
		bad.add("KeyPrefix", "%v", err)
	}
	if c.LockTimeout < 0 || c.LockTimeout > maxLockTimeout {
		bad.add("LockTimeout", "%v is not from 0 (until the invocation's deadline) to %v", c.LockTimeout, maxLockTimeout)
	}
	switch {
	case c.DedupeWindow < 0 || c.DedupeWindow > maxDedupeWindow:
		bad.add("DedupeWindow", "%v is not from 0 (%v) to %v", c.DedupeWindow, defaultDedupeWindow, maxDedupeWindow)
	case c.DedupeWindow == 0:
		c.DedupeWindow = defaultDedupeWindow
	}
	if c.LocalCache < 0 || c.LocalCache > maxLocalCache {
		bad.add("LocalCache", "%d is not from 0 to %d", c.LocalCache, maxLocalCache)
	}
	if c.WaitInProgress < 0 || c.WaitInProgress > maxWait {
		bad.add("WaitInProgress", "%v is not from 0 (no wait) to %v", c.WaitInProgress, maxWait)
	}
	if c.Test.Now == nil {
		c.Test.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// envError renames a ConfigError to its environment variable, for a
// configuration that came from ConfigFromEnv.
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
