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
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/sqs-once/sqs-once/internal/dedupe"
	"github.com/sqs-once/sqs-once/internal/processor"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/internal/target"
)

// Handler is your code for one SQS message. Return nil when its side effect
// is done, an error to have the message retried, or Permanent(err) for one
// that no retry can fix. A panic or runtime.Goexit counts as an error. Key and
// Fence read the message's idempotency key and fencing token from ctx. A
// message whose key cannot be read (Config.Key names a member its body lacks)
// never reaches the Handler: it is retried, and ends in the dead-letter queue.
type Handler func(ctx context.Context, msg events.SQSMessage) error

// InProgressPolicy is what Handle does with a message whose key another
// holder is processing right now.
type InProgressPolicy string

const (
	// InProgressRetry reports the message failed, so SQS delivers it again
	// later; if the other holder dies, the redelivery takes its lock over.
	InProgressRetry InProgressPolicy = "retry"
	// InProgressDrop reports it done. If the other holder then fails, the
	// message is lost: choose it only where a lost message is acceptable.
	InProgressDrop InProgressPolicy = "drop"
)

// Config configures a Processor. Zero values mean the documented defaults;
// each field names the environment variable FromEnv reads it from.
type Config struct {
	// Table is the DynamoDB table (IDEMPOTENCY_TABLE): partition key "id"
	// (String), TTL on "expiresAt". Required.
	Table string
	// KeyPrefix starts every record id, "<prefix>#<key>", so consumers can
	// share a table (KEY_PREFIX). Required: at most 128 bytes of UTF-8,
	// without '#', spaces, control or invisible characters.
	KeyPrefix string
	// Key says where a message's key comes from (IDEMPOTENCY_KEY):
	// "messageId" (the default; the original id on a replay),
	// "body:<JSON pointer>" such as "body:/orderId", or "attribute:<name>".
	Key string
	// KeyFunc, when set, computes the key instead of Key.
	KeyFunc func(msg events.SQSMessage) (string, error)
	// LockTimeout is how long a lock lasts before another holder may take
	// it over (LOCK_TIMEOUT); it is renewed every third of it while the
	// handler runs. Zero: until the invocation's deadline plus 5 s.
	LockTimeout time.Duration
	// DedupeWindow is how long a completed key suppresses duplicates
	// (DEDUPE_WINDOW). Zero: 24 hours.
	DedupeWindow time.Duration
	// InProgress is InProgressRetry (the default) or InProgressDrop
	// (IN_PROGRESS).
	InProgress InProgressPolicy
	// MaxConcurrency bounds the records of one batch processed at once
	// (MAX_CONCURRENCY). Zero: 10. A FIFO message group runs in order.
	MaxConcurrency int
	// FailureBackoffBase, when set, hides a failed message for a jittered
	// FailureBackoffBase × 2^receives (FAILURE_BACKOFF_BASE). With QueueURL,
	// a failure on the last receive the queue's redrive policy allows is
	// not delayed: the next receive moves the message to the dead-letter
	// queue.
	FailureBackoffBase time.Duration
	// OperatorQueueURL receives Permanent failures and payload mismatches
	// (OPERATOR_QUEUE_URL). Empty: they are retried like any failure.
	OperatorQueueURL string
	// ValidatePayload keeps a hash of each message body with its key, so a
	// later message with the same key and another body is a conflict sent
	// to the operator queue with reason payload-mismatch, never dropped as a
	// duplicate (PAYLOAD_VALIDATION=on). The hash is of the body's bytes: a
	// re-send with other white space or member order is a conflict too.
	ValidatePayload bool
	// LocalCache is how many completed keys the process remembers, to answer
	// a repeated duplicate with no DynamoDB call (LOCAL_CACHE). Zero: off.
	// A record deleted by hand is still a duplicate here until its window
	// ends.
	LocalCache int
	// Target, when set, receives the records instead of a Handler (TARGET):
	// "lambda:<function name or ARN>[:<alias>]" invokes that function with
	// the records this invocation holds the locks of, as an SQS event in
	// Lambda's shape, and reads its partial batch response;
	// "sqs:<queue URL>", "sns:<topic ARN>" and "events:<bus name or ARN>"
	// send each message on. A record is completed once the target accepted
	// it. See the README's "Put sqs-once in front of an existing consumer".
	Target string
	// TargetEventSource and TargetDetailType are an events target's Source
	// and DetailType (TARGET_EVENT_SOURCE, TARGET_DETAIL_TYPE). Empty:
	// "sqs-once" and "sqs-once message".
	TargetEventSource string
	TargetDetailType  string
	// QueueURL is the queue the function consumes (QUEUE_URL). When set, the
	// first event of each execution environment reads the queue's settings
	// (sqs:GetQueueAttributes) and logs one warning if they are unsafe: a
	// visibility timeout under 6 × the function's timeout, no redrive
	// policy, a retention shorter than the receives before the DLQ. The
	// redrive policy's maxReceiveCount it reads there tells
	// FailureBackoffBase which receive is the last.
	QueueURL string
	// AWS is the SDK configuration for DynamoDB and SQS, as
	// config.LoadDefaultConfig returns it. Required.
	AWS aws.Config
	// Logger receives one line per record. Nil: slog.Default() as it is
	// when New is called (set your default logger first).
	Logger *slog.Logger
	// Metrics, when set, receives the processor's metrics at the end of
	// each Handle: CloudWatch Embedded Metric Format lines (namespace
	// sqs-once, dimension FunctionName) that CloudWatch Logs turns into
	// metrics with no API call. Pass os.Stdout in a Lambda function, as
	// cmd/processor and FromEnv do. Nil: no metrics. See the README's
	// "Metrics" for what each metric means. Do writes none.
	Metrics io.Writer
	// MetricsFunctionName is the metrics' FunctionName dimension. Empty:
	// the AWS_LAMBDA_FUNCTION_NAME Lambda sets, else KeyPrefix.
	MetricsFunctionName string
}

// The operator queue's vocabulary: the attributes a forwarded message
// carries, and the reasons the processor gives.
const (
	// AttrReason is the attribute that says why a message was forwarded.
	AttrReason = sqsmsg.AttrReason
	// AttrOriginalMessageID is the id of the message as first sent; copies
	// of one message (replays, a retried send) share it.
	AttrOriginalMessageID = sqsmsg.AttrOriginalMessageID
	// ReasonPermanent: the Handler returned Permanent(err).
	ReasonPermanent = processor.ReasonPermanent
	// ReasonPayloadMismatch: the key was seen with another body.
	ReasonPayloadMismatch = processor.ReasonPayloadMismatch
	// ReasonTargetRefused: the Config.Target refused the message for a
	// reason no retry fixes (access denied, no such destination, too large).
	ReasonTargetRefused = processor.ReasonTargetRefused
	// AttrKey and AttrFence carry the key and fencing token on the messages
	// an sqs or sns target sends; an events target puts them in the Detail's
	// "sqsOnce" member.
	AttrKey   = target.AttrKey
	AttrFence = target.AttrFence
)

// Errors a caller tests with errors.Is.
var (
	// ErrDuplicate: the key already completed within its window; the
	// function did not run.
	ErrDuplicate = dedupe.ErrDuplicate
	// ErrInProgress: another holder has the key's lock; the function did
	// not run.
	ErrInProgress = dedupe.ErrInProgress
	// ErrPayloadMismatch: the key is held for another payload.
	ErrPayloadMismatch = dedupe.ErrPayloadMismatch
	// ErrLockLost is the cause of a handler's context when its lock was
	// taken over or could not be renewed: stop, and return an error.
	ErrLockLost = dedupe.ErrLockLost
	// ErrUnavailable: the table failed, throttled or did not answer; the
	// function did not run.
	ErrUnavailable = dedupe.ErrUnavailable
	// ErrMisconfigured: the table is missing, denied, of another schema, or
	// holds a record the protocol did not write; the function did not run.
	ErrMisconfigured = dedupe.ErrMisconfigured
	// ErrNoKey: Do's key is empty or longer than 1024 bytes, or a record
	// lacks the key its Config names (the record is retried, never run).
	ErrNoKey = processor.ErrNoKey
	// ErrNoHandler: Handle was called on a Processor built without one.
	ErrNoHandler = errors.New("sqsonce: Processor has no Handler")
)

// Processor runs a Handler for SQS events, and any function with Do, under
// the idempotency lock. It is safe for concurrent use; build one per process.
type Processor struct {
	h         *processor.Handler
	noHandler bool
}

// New builds a Processor from cfg. h may be nil for a Processor used only
// with Do, and must be nil with a Config.Target. An invalid cfg is an error
// naming the field.
func New(cfg Config, h Handler) (*Processor, error) {
	pc, err := cfg.processorConfig()
	if err != nil {
		return nil, err
	}
	if cfg.Target != "" {
		if h != nil {
			return nil, &processor.ConfigError{Field: "Target", Msg: "set together with a Handler: choose one (pass a nil Handler)"}
		}
		ph, err := processor.NewHandlerWith(pc, cfg.AWS, cfg.deps(nil))
		if err != nil {
			return nil, err
		}
		return &Processor{h: ph}, nil
	}
	business := processor.Business(h)
	if h == nil {
		// Never called: Handle refuses first.
		business = func(context.Context, events.SQSMessage) error { return ErrNoHandler }
	}
	ph, err := processor.NewHandlerWith(pc, cfg.AWS, cfg.deps(business))
	if err != nil {
		return nil, err
	}
	return &Processor{h: ph, noHandler: h == nil}, nil
}

// deps are the processor's collaborators other than the SDK clients.
func (c Config) deps(business processor.Business) processor.Deps {
	return processor.Deps{Business: business, Logger: c.Logger, Metrics: c.Metrics, FunctionName: c.MetricsFunctionName}
}

// FromEnv builds a Processor from the environment variables the deployed
// function reads (see Config, and the README's "Processor configuration"),
// and the SDK configuration from the default chain, with metrics on
// standard output as the deployed function writes them. An invalid
// variable is an error naming it. It is ConfigFromEnv(os.LookupEnv), the
// AWS configuration from config.LoadDefaultConfig, Metrics = os.Stdout, and
// New.
func FromEnv(ctx context.Context, h Handler) (*Processor, error) {
	cfg, err := ConfigFromEnv(os.LookupEnv)
	if err != nil {
		return nil, err
	}
	cfg.Metrics = os.Stdout
	if cfg.AWS, err = config.LoadDefaultConfig(ctx); err != nil {
		return nil, fmt.Errorf("sqsonce: load the AWS configuration: %w", err)
	}
	return New(cfg, h)
}

// ConfigFromEnv reads the environment variables of Config's fields through
// lookup (os.LookupEnv, or a map's in tests), for a program that sets more
// (a Logger, a KeyFunc, its own AWS configuration) before calling New.
// KEY_PREFIX defaults to AWS_LAMBDA_FUNCTION_NAME. An invalid variable is an
// error naming it.
func ConfigFromEnv(lookup func(name string) (string, bool)) (Config, error) {
	pc, err := processor.LoadConfig(lookup)
	if err != nil {
		return Config{}, err
	}
	return Config{
		Table:              pc.Table,
		KeyPrefix:          pc.KeyPrefix,
		Key:                pc.Key.String(),
		LockTimeout:        pc.LockTimeout,
		DedupeWindow:       pc.DedupeWindow,
		InProgress:         InProgressPolicy(pc.InProgress),
		MaxConcurrency:     pc.MaxConcurrency,
		FailureBackoffBase: pc.FailureBackoffBase,
		OperatorQueueURL:   pc.OperatorQueueURL,
		ValidatePayload:    pc.ValidatePayload,
		LocalCache:         pc.LocalCache,
		Target:             pc.Target,
		TargetEventSource:  pc.TargetEventSource,
		TargetDetailType:   pc.TargetDetailType,
		QueueURL:           pc.QueueURL,
	}, nil
}

func (c Config) processorConfig() (processor.Config, error) {
	var errs []error
	pc := processor.Config{
		Table:              c.Table,
		KeyPrefix:          c.KeyPrefix,
		LockTimeout:        c.LockTimeout,
		DedupeWindow:       c.DedupeWindow,
		InProgress:         string(c.InProgress),
		MaxConcurrency:     c.MaxConcurrency,
		FailureBackoffBase: c.FailureBackoffBase,
		OperatorQueueURL:   c.OperatorQueueURL,
		ValidatePayload:    c.ValidatePayload,
		LocalCache:         c.LocalCache,
		Target:             c.Target,
		TargetEventSource:  c.TargetEventSource,
		TargetDetailType:   c.TargetDetailType,
		QueueURL:           c.QueueURL,
	}
	if c.Target != "" {
		if _, err := target.ParseSpec(c.Target); err != nil {
			errs = append(errs, &processor.ConfigError{Field: "Target", Msg: err.Error()})
		}
	}
	switch {
	case c.KeyFunc != nil && c.Key != "":
		errs = append(errs, &processor.ConfigError{Field: "Key", Msg: "set together with KeyFunc: choose one"})
	case c.KeyFunc != nil:
		pc.Key = processor.KeyFunc(c.KeyFunc)
	default:
		spec := c.Key
		if spec == "" {
			spec = "messageId"
		}
		key, err := processor.ParseKeySource(spec)
		if err != nil {
			errs = append(errs, &processor.ConfigError{Field: "Key", Msg: err.Error()})
		}
		pc.Key = key
	}
	if c.AWS.Region == "" && c.AWS.BaseEndpoint == nil {
		errs = append(errs, &processor.ConfigError{Field: "AWS", Msg: "no region: load it with config.LoadDefaultConfig"})
	}
	return pc, errors.Join(append([]error{pc.Validate()}, errs...)...)
}

// Handle processes an SQS event for lambda.Start: each record under its
// key's lock, the records to retry in the partial batch response. Its one
// error is a configuration only the event shows to be wrong (the operator
// queue is the queue being consumed), or ErrNoHandler.
func (p *Processor) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	if p.noHandler {
		return events.SQSEventResponse{}, ErrNoHandler
	}
	return p.h.Handle(ctx, ev)
}

// Do runs fn once per key, with the same lock, window and table as the
// records: for an API handler, a cron job, any side effect. It returns nil
// when fn ran and succeeded, fn's error when it failed (the lock released so
// a retry runs again), and otherwise an error matching ErrDuplicate,
// ErrInProgress, ErrUnavailable or ErrMisconfigured, fn not run.
func (p *Processor) Do(ctx context.Context, key string, fn func(ctx context.Context) error) error {
	return p.h.Do(ctx, key, fn)
}

// Permanent marks err as one no retry can fix: with an operator queue the
// message goes there at once, with reason permanent-error.
func Permanent(err error) error { return processor.Permanent(err) }

// IsPermanent reports whether err, or an error it wraps, was marked
// Permanent: a test of a Handler checks its classification with it.
func IsPermanent(err error) bool { return processor.IsPermanent(err) }

// Key is the idempotency key a Handler or Do's function runs for.
func Key(ctx context.Context) string { return processor.IdempotencyKey(ctx) }

// Fence is the fencing token of the lock a Handler or Do's function runs
// under: larger than every earlier lock's of the key (a
// 64-bit number; a new record starts from the clock in milliseconds). A downstream
// store that refuses a write carrying a lower token than one it has seen
// refuses a holder whose lock was taken over.
func Fence(ctx context.Context) int64 { return processor.FenceToken(ctx) }
