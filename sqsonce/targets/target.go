package targets

import (
	"fmt"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/retrybudget"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/sqsonce"
)

func refused(err error) error { return fmt.Errorf("%w: %w", sqsonce.ErrTargetRefused, err) }
func unknown(err error) error { return fmt.Errorf("%w: %w", sqsonce.ErrOutcomeUnknown, err) }

// Defaults of a bus target's entries.
const (
	DefaultEventSource = "sqs-once"
	DefaultDetailType  = "sqs-once message"
)

// ToFunction is the target that invokes a Lambda function (a name, a
// partial or full ARN, with an optional :alias or :version) once per batch,
// synchronously, with the records in Lambda's own SQS event shape, and
// reads its partial batch response. Its clients come from awsCfg.
func ToFunction(awsCfg aws.Config, function string) (*LambdaTarget, error) {
	spec, err := parse(Lambda, function)
	if err != nil {
		return nil, err
	}
	return newTarget(spec, awsCfg, options{}).(*LambdaTarget), nil
}

// ToQueue is the target that sends each message to the SQS queue at
// queueURL.
func ToQueue(awsCfg aws.Config, queueURL string) (*SQSTarget, error) {
	spec, err := parse(SQS, queueURL)
	if err != nil {
		return nil, err
	}
	return newTarget(spec, awsCfg, options{}).(*SQSTarget), nil
}

// ToTopic is the target that publishes each message to the SNS topic
// topicARN.
func ToTopic(awsCfg aws.Config, topicARN string) (*SNSTarget, error) {
	spec, err := parse(SNS, topicARN)
	if err != nil {
		return nil, err
	}
	return newTarget(spec, awsCfg, options{}).(*SNSTarget), nil
}

// ToBus is the target that puts each message on the EventBridge bus (a name
// or an ARN), with source and detailType ("": DefaultEventSource and
// DefaultDetailType).
func ToBus(awsCfg aws.Config, bus, source, detailType string) (*EventsTarget, error) {
	spec, err := parse(Events, bus)
	if err != nil {
		return nil, err
	}
	return newTarget(spec, awsCfg, options{eventSource: source, detailType: detailType}).(*EventsTarget), nil
}

func parse(kind Kind, dest string) (Spec, error) {
	return ParseSpec(string(kind) + ":" + dest)
}

// FromEnv builds the target the deployed processor's environment names:
// TARGET (lambda:<function>, sqs:<queue URL>, sns:<topic ARN> or
// events:<bus>), with TARGET_EVENT_SOURCE and TARGET_DETAIL_TYPE for a bus.
// It returns nil, nil when TARGET is not set. A lambda target naming
// AWS_LAMBDA_FUNCTION_NAME, the processor's own function, is refused: every
// delivery would invoke the processor again. Errors name the variables.
func FromEnv(lookup func(name string) (string, bool), awsCfg aws.Config, logger *slog.Logger) (sqsonce.Target, error) {
	r := envconfig.NewReader(lookup)
	s := r.String("TARGET", "")
	opts := options{
		eventSource: r.String("TARGET_EVENT_SOURCE", ""),
		detailType:  r.String("TARGET_DETAIL_TYPE", ""),
		logger:      logger,
	}
	self := r.String("AWS_LAMBDA_FUNCTION_NAME", "")
	if s == "" {
		return nil, r.Err()
	}
	spec, err := ParseSpec(s)
	switch {
	case err != nil:
		r.Fail("TARGET", "%v", err)
	case spec.Kind == Lambda && self != "" && spec.FunctionName() == self:
		r.Fail("TARGET", "%s: the target is the processor's own function %s: every delivery would invoke the processor again", spec, self)
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	return newTarget(spec, awsCfg, opts), nil
}

// options are a target's settings besides its Spec.
type options struct {
	eventSource, detailType string
	logger                  *slog.Logger
}

// newTarget builds the target of a valid spec, with clients from awsCfg
// whose retries back off at most retrybudget.MaxBackoff.
func newTarget(spec Spec, awsCfg aws.Config, opts options) sqsonce.Target {
	switch spec.Kind {
	case Lambda:
		return &LambdaTarget{API: lambda.NewFromConfig(awsCfg, func(o *lambda.Options) { o.Retryer = invokeRetryer(); o.APIOptions = safeBody(o.APIOptions) }), Function: spec.Dest, Logger: opts.logger}
	case SQS:
		return &SQSTarget{API: sqs.NewFromConfig(awsCfg, func(o *sqs.Options) { o.Retryer = retrybudget.Client(o.Retryer); o.APIOptions = safeBody(o.APIOptions) }), QueueURL: spec.Dest}
	case SNS:
		return &SNSTarget{API: sns.NewFromConfig(awsCfg, func(o *sns.Options) { o.Retryer = retrybudget.Client(o.Retryer); o.APIOptions = safeBody(o.APIOptions) }), TopicARN: spec.Dest}
	}
	return &EventsTarget{
		API: eventbridge.NewFromConfig(awsCfg, func(o *eventbridge.Options) {
			o.Retryer = retrybudget.Client(o.Retryer)
			o.APIOptions = safeBody(o.APIOptions)
		}),
		Bus:        spec.Dest,
		Source:     opts.eventSource,
		DetailType: opts.detailType,
	}
}

// CheckSource refuses to deliver the records of the queue t sends to: they
// would come back to the processor for ever.
func (t *SQSTarget) CheckSource(eventSourceARN string) error {
	if sqsmsg.SameQueue(t.QueueURL, eventSourceARN) {
		return fmt.Errorf("the target queue %s is %s, the queue being consumed", t.QueueURL, eventSourceARN)
	}
	return nil
}

// safeBody adds retrybudget.SafeRequestBody to a client's API options: a
// delivery the target's service answered is never sent again by the SDK's
// retryer for a transport quirk, which would be a second delivery.
func safeBody(opts []func(*middleware.Stack) error) []func(*middleware.Stack) error {
	return append(opts, retrybudget.SafeRequestBody)
}
