package processor

import (
	"strings"
	"time"

	"github.com/sqs-once/sqs-once/internal/dedupe"
	"github.com/sqs-once/sqs-once/internal/envconfig"
)

// InProgress policies: what to do with a record whose key another holder is
// processing right now.
const (
	// InProgressRetry reports the record failed so SQS redelivers it later;
	// if the other holder dies, the redelivery takes the lock over.
	InProgressRetry = "retry"
	// InProgressDrop reports it done. If the other holder then fails, the
	// message is lost: choose it only when a lost message is acceptable.
	InProgressDrop = "drop"
)

// maxPrefixBytes with maxKeyBytes keeps record ids within DynamoDB's
// 2048-byte partition key.
const maxPrefixBytes = 128

// Config is the processor's configuration, read from the environment.
type Config struct {
	Table     string
	KeyPrefix string
	Key       KeySource
	// LockTimeout is zero to hold the lock until the invocation's deadline.
	LockTimeout    time.Duration
	DedupeWindow   time.Duration
	InProgress     string
	MaxConcurrency int
	// FailureBackoffBase is zero to leave failed records to the queue's own
	// visibility timeout.
	FailureBackoffBase time.Duration
	// OperatorQueueURL is empty to retry permanent failures like any other.
	OperatorQueueURL string
}

// LoadConfig reads the processor's environment; the error names every bad
// variable.
func LoadConfig(env envconfig.Lookup) (Config, error) {
	r := envconfig.NewReader(env)
	c := Config{
		Table:              r.Required("IDEMPOTENCY_TABLE"),
		KeyPrefix:          r.String("KEY_PREFIX", r.String("AWS_LAMBDA_FUNCTION_NAME", "")),
		LockTimeout:        r.Seconds("LOCK_TIMEOUT", 0, time.Second, 12*time.Hour),
		DedupeWindow:       r.Seconds("DEDUPE_WINDOW", dedupe.DefaultDedupeWindow, time.Second, 366*24*time.Hour),
		InProgress:         r.OneOf("IN_PROGRESS", InProgressRetry, InProgressRetry, InProgressDrop),
		MaxConcurrency:     r.Int("MAX_CONCURRENCY", 10, 1, 1000),
		FailureBackoffBase: r.Seconds("FAILURE_BACKOFF_BASE", 0, time.Second, maxVisibility),
		OperatorQueueURL:   r.QueueURL("OPERATOR_QUEUE_URL", false),
	}
	switch {
	case c.KeyPrefix == "":
		r.Fail("KEY_PREFIX", "not set, and AWS_LAMBDA_FUNCTION_NAME (its default) is not set either")
	case len(c.KeyPrefix) > maxPrefixBytes || strings.ContainsAny(c.KeyPrefix, "# \t\n"):
		// "a#b" + "#" + "c" would be the record of prefix "a", key "b#c".
		r.Fail("KEY_PREFIX", "%q must be at most %d bytes without '#' or white space", c.KeyPrefix, maxPrefixBytes)
	}
	key, err := ParseKeySource(r.String("IDEMPOTENCY_KEY", "messageId"))
	if err != nil {
		r.Fail("IDEMPOTENCY_KEY", "%v", err)
	}
	c.Key = key
	return c, r.Err()
}
