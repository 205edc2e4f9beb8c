package target

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqs-once/sqs-once/internal/retrybudget"
)

// Message is one record the processor holds the lock of, to deliver.
type Message struct {
	Record events.SQSMessage
	// Key is the record's idempotency key, Fence its lock's fencing token;
	// both travel with the message where the destination can carry them.
	Key   string
	Fence int64
}

// Target delivers messages to one destination.
type Target interface {
	// Deliver sends msgs (in order: a FIFO message group's records are in
	// queue order) and returns one error per message, at the same index: nil
	// when the destination accepted it, an error matching ErrRefused when it
	// never will, ErrOutcomeUnknown when it may have acted, any other error
	// when it did not act and a retry may succeed. ctx's deadline bounds the
	// calls and their retries.
	Deliver(ctx context.Context, msgs []Message) []error
}

var (
	// ErrRefused: the destination refused the message for a reason no retry
	// fixes (access denied, no such destination, too large, invalid).
	ErrRefused = errors.New("target refused the message")
	// ErrOutcomeUnknown: the call may have reached the destination and been
	// applied, but no answer says so (a timeout, a connection lost after the
	// request was sent, a service error of the Lambda Invoke API).
	ErrOutcomeUnknown = errors.New("target outcome unknown")
)

func refused(err error) error { return fmt.Errorf("%w: %w", ErrRefused, err) }
func unknown(err error) error { return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err) }

// Options are the settings of a Target besides its Spec.
type Options struct {
	// EventSource and DetailType name an events target's entries; empty
	// means DefaultEventSource and DefaultDetailType.
	EventSource string
	DetailType  string
	// Self is the name of the function the processor runs as
	// (AWS_LAMBDA_FUNCTION_NAME): a lambda target naming it is refused,
	// since every delivery would come back to the processor.
	Self string
	// Logger receives a lambda target's line per failed invocation; nil:
	// slog.Default().
	Logger *slog.Logger
}

// Defaults of an events target's entries.
const (
	DefaultEventSource = "sqs-once"
	DefaultDetailType  = "sqs-once message"
)

// ErrSelf: a lambda target names the processor's own function.
var ErrSelf = errors.New("the target is the processor's own function: every delivery would invoke the processor again")

// New builds the Target spec names, with clients from awsCfg whose retries
// back off at most retrybudget.MaxBackoff.
func New(spec Spec, awsCfg aws.Config, opts Options) (Target, error) {
	switch spec.Kind {
	case Lambda:
		if opts.Self != "" && spec.FunctionName() == opts.Self {
			return nil, fmt.Errorf("%w: %s (TARGET=%s)", ErrSelf, opts.Self, spec)
		}
		return &LambdaTarget{API: lambda.NewFromConfig(awsCfg, func(o *lambda.Options) { o.Retryer = invokeRetryer() }), Function: spec.Dest, Logger: opts.Logger}, nil
	case SQS:
		return &SQSTarget{API: sqs.NewFromConfig(awsCfg, func(o *sqs.Options) { o.Retryer = retrybudget.Client(o.Retryer) }), QueueURL: spec.Dest}, nil
	case SNS:
		return &SNSTarget{API: sns.NewFromConfig(awsCfg, func(o *sns.Options) { o.Retryer = retrybudget.Client(o.Retryer) }), TopicARN: spec.Dest}, nil
	case Events:
		return &EventsTarget{
			API:        eventbridge.NewFromConfig(awsCfg, func(o *eventbridge.Options) { o.Retryer = retrybudget.Client(o.Retryer) }),
			Bus:        spec.Dest,
			Source:     opts.EventSource,
			DetailType: opts.DetailType,
		}, nil
	}
	return nil, fmt.Errorf("%w: unknown kind %q", ErrBadSpec, spec.Kind)
}
