package processor

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/internal/dedupe"
	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/target"
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
	// ValidatePayload keeps a hash of each message body with its key, so a
	// later message with the same key and another body is a conflict
	// (payload-mismatch), not a duplicate.
	ValidatePayload bool
	// LocalCache is how many completed keys each execution environment
	// remembers, to answer repeated duplicates without a table call; 0: off.
	LocalCache int
	// Target, when set, receives the acquired records instead of a Business
	// function: lambda:<function>, sqs:<queue URL>, sns:<topic ARN> or
	// events:<bus> (package target).
	Target string
	// TargetEventSource and TargetDetailType are the Source and DetailType
	// of an events target's entries; empty means the defaults.
	TargetEventSource string
	TargetDetailType  string
	// QueueURL is the queue the function consumes; when set, its first
	// event reads the queue's attributes and warns if they are unsafe.
	QueueURL string
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
		MaxConcurrency:     r.Int("MAX_CONCURRENCY", DefaultMaxConcurrency, 1, 1000),
		FailureBackoffBase: r.Seconds("FAILURE_BACKOFF_BASE", 0, time.Second, maxVisibility),
		OperatorQueueURL:   r.QueueURL("OPERATOR_QUEUE_URL", false),
		ValidatePayload:    r.OneOf("PAYLOAD_VALIDATION", "off", "on", "off") == "on",
		LocalCache:         r.Int("LOCAL_CACHE", 0, 0, maxLocalCache),
		Target:             r.String("TARGET", ""),
		TargetEventSource:  r.String("TARGET_EVENT_SOURCE", ""),
		TargetDetailType:   r.String("TARGET_DETAIL_TYPE", ""),
		QueueURL:           r.QueueURL("QUEUE_URL", false),
	}
	if c.Target != "" {
		if _, err := target.ParseSpec(c.Target); err != nil {
			r.Fail("TARGET", "%v", err)
		}
	}
	if c.KeyPrefix == "" {
		r.Fail("KEY_PREFIX", "not set, and AWS_LAMBDA_FUNCTION_NAME (its default) is not set either")
	} else if err := checkKeyPrefix(c.KeyPrefix); err != nil {
		r.Fail("KEY_PREFIX", "%v", err)
	}
	key, err := ParseKeySource(r.String("IDEMPOTENCY_KEY", "messageId"))
	if err != nil {
		r.Fail("IDEMPOTENCY_KEY", "%v", err)
	}
	c.Key = key
	return c, r.Err()
}

// maxLocalCache bounds LocalCache: a million keys is some 100 MB, near the
// memory of a small function.
const maxLocalCache = 1_000_000

// DefaultMaxConcurrency is MaxConcurrency's default.
const DefaultMaxConcurrency = 10

// ConfigError is a Config field that cannot work.
type ConfigError struct {
	Field string
	Msg   string
}

func (e *ConfigError) Error() string { return "invalid Config." + e.Field + ": " + e.Msg }

// Validate reports every field of c that cannot work, as ConfigErrors.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// withDefaults fills in the zero values and refuses what cannot work: a
// library user gets an error naming the field, never a panic or a hang.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if c.Table == "" {
		bad("Table", "empty: name the idempotency table")
	}
	if c.KeyPrefix == "" {
		bad("KeyPrefix", "empty: record ids are <prefix>#<key>, and the prefix keeps consumers of one table apart")
	} else if err := checkKeyPrefix(c.KeyPrefix); err != nil {
		bad("KeyPrefix", "%v", err)
	}
	if c.LockTimeout < 0 {
		bad("LockTimeout", "%v is negative (zero holds the lock until the invocation's deadline)", c.LockTimeout)
	}
	if c.DedupeWindow < 0 {
		bad("DedupeWindow", "%v is negative", c.DedupeWindow)
	} else if c.DedupeWindow == 0 {
		c.DedupeWindow = dedupe.DefaultDedupeWindow
	}
	switch c.InProgress {
	case "":
		c.InProgress = InProgressRetry
	case InProgressRetry, InProgressDrop:
	default:
		bad("InProgress", "%q is not %q or %q", c.InProgress, InProgressRetry, InProgressDrop)
	}
	if c.MaxConcurrency < 0 {
		bad("MaxConcurrency", "%d is negative", c.MaxConcurrency)
	} else if c.MaxConcurrency == 0 {
		c.MaxConcurrency = DefaultMaxConcurrency
	}
	if c.LocalCache < 0 || c.LocalCache > maxLocalCache {
		bad("LocalCache", "%d is not from 0 to %d", c.LocalCache, maxLocalCache)
	}
	if c.FailureBackoffBase < 0 || c.FailureBackoffBase > maxVisibility {
		bad("FailureBackoffBase", "%v is not from 0 to %v", c.FailureBackoffBase, maxVisibility)
	}
	return c, errors.Join(errs...)
}

// checkKeyPrefix refuses a prefix that could make two keys' records collide
// ("a#b" + "#" + "c" is the record of prefix "a", key "b#c") or that a
// person reading the table or the logs could not tell apart from another
// (white space, control and format characters, invalid UTF-8).
func checkKeyPrefix(p string) error {
	if len(p) > maxPrefixBytes {
		return fmt.Errorf("%q is %d bytes, more than %d", p, len(p), maxPrefixBytes)
	}
	if !utf8.ValidString(p) {
		return fmt.Errorf("%q is not valid UTF-8", p)
	}
	for _, r := range p {
		switch {
		case r == '#':
			return fmt.Errorf("%q contains '#', the separator of prefix and key", p)
		case unicode.IsSpace(r), unicode.IsControl(r), unicode.Is(unicode.Cf, r):
			return fmt.Errorf("%q contains %U, a space, control or invisible character", p, r)
		}
	}
	return nil
}

// ErrOperatorQueueIsSource: the operator queue is the queue being consumed,
// so a permanent failure would come back to the processor for ever.
var ErrOperatorQueueIsSource = errors.New("OPERATOR_QUEUE_URL names the queue this function consumes")

// ErrTargetIsSource: an sqs target is the queue being consumed, so every
// message would come back to the processor for ever.
var ErrTargetIsSource = errors.New("TARGET names the queue this function consumes")

// checkSource refuses an event from the operator queue itself, or from an
// sqs target's queue. Only the event names the queue being consumed, so
// this cannot be checked at start.
func (h *Handler) checkSource(records []events.SQSMessage) error {
	if spec, err := target.ParseSpec(h.cfg.Target); err == nil && spec.Kind == target.SQS {
		for _, rec := range records {
			if sameQueue(spec.Dest, rec.EventSourceARN) {
				return fmt.Errorf("processor: %w (%s is %s): every message would loop for ever; point TARGET at another queue",
					ErrTargetIsSource, spec.Dest, rec.EventSourceARN)
			}
		}
	}
	if h.cfg.OperatorQueueURL == "" {
		return nil
	}
	for _, rec := range records {
		if sameQueue(h.cfg.OperatorQueueURL, rec.EventSourceARN) {
			return fmt.Errorf("processor: %w (%s is %s): permanent failures would loop for ever; point OPERATOR_QUEUE_URL at a queue of its own",
				ErrOperatorQueueIsSource, h.cfg.OperatorQueueURL, rec.EventSourceARN)
		}
	}
	return nil
}

// sameQueue compares a queue URL, https://sqs.<region>.amazonaws.com/<account>/<name>
// or any endpoint's /<account>/<name>, with a queue ARN by account and name,
// and by region where the URL's host names one.
func sameQueue(queueURL, arn string) bool {
	parts := strings.Split(arn, ":")
	u, err := url.Parse(queueURL)
	if len(parts) != 6 || err != nil {
		return false
	}
	path := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(path) != 2 || path[0] != parts[4] || path[1] != parts[5] {
		return false
	}
	host := strings.Split(u.Hostname(), ".")
	switch {
	case len(host) >= 3 && host[0] == "sqs": // sqs.<region>.amazonaws.com
		return host[1] == parts[3]
	case len(host) >= 3 && host[1] == "queue": // the legacy <region>.queue.amazonaws.com
		return host[0] == parts[3]
	}
	return true
}
