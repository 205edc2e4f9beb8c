package targets

import (
	"fmt"
	"log/slog"
	"strings"

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
// reads its partial batch response. Its clients come from awsCfg. A
// function that is none of those forms is an error matching ErrBadSpec.
func ToFunction(awsCfg aws.Config, function string) (*LambdaTarget, error) {
	if err := checkArg("ToFunction", "function", Lambda, function); err != nil {
		return nil, err
	}
	return newFunction(awsCfg, function, nil), nil
}

// ToQueue is the target that sends each message to the SQS queue at
// queueURL, https://sqs.<region>.amazonaws.com/<account>/<queue> or any
// endpoint's http(s)://<host>/<account>/<queue>; another form is an error
// matching ErrBadSpec.
func ToQueue(awsCfg aws.Config, queueURL string) (*SQSTarget, error) {
	if err := checkArg("ToQueue", "queueURL", SQS, queueURL); err != nil {
		return nil, err
	}
	return newQueue(awsCfg, queueURL), nil
}

// ToTopic is the target that publishes each message to the SNS topic
// topicARN; a value that is not a topic's ARN is an error matching
// ErrBadSpec.
func ToTopic(awsCfg aws.Config, topicARN string) (*SNSTarget, error) {
	if err := checkArg("ToTopic", "topicARN", SNS, topicARN); err != nil {
		return nil, err
	}
	return newTopic(awsCfg, topicARN), nil
}

// ToBus is the target that puts each message on the EventBridge bus (a name
// or an ARN; another form is an error matching ErrBadSpec), with source and
// detailType ("": DefaultEventSource and DefaultDetailType). Source and
// detailType are sent as given: EventBridge sets no form for them that a
// check here could hold them to, and refuses an entry it will not take,
// which Deliver reports per message.
func ToBus(awsCfg aws.Config, bus, source, detailType string) (*EventsTarget, error) {
	if err := checkArg("ToBus", "bus", Events, bus); err != nil {
		return nil, err
	}
	return newBus(awsCfg, bus, source, detailType), nil
}

// ToDurableFunction is the target that starts one execution of a Lambda
// durable function per message, named after the record's key (see
// DurableTarget), asynchronously: set the target's Synchronous to wait for
// each execution's end. function is a function name, a partial ARN
// (<account>:function:<name>) or a full ARN, without qualifier; qualifier
// is a version or an alias, not $LATEST (Lambda invokes a durable function
// by a qualified ARN, and an execution's replays must run the code it
// started with). Another form is an error matching ErrBadSpec.
func ToDurableFunction(awsCfg aws.Config, function, qualifier string) (*DurableTarget, error) {
	if m := lambdaName().FindStringSubmatch(function); m == nil || m[6] != "" {
		return nil, fmt.Errorf("%w: ToDurableFunction: function %q: want <function name or ARN> without a qualifier (the qualifier is its own argument)", ErrBadSpec, function)
	}
	if !valid(Durable, function+":"+qualifier) {
		return nil, fmt.Errorf("%w: ToDurableFunction: qualifier %q: want a version or an alias (up to 128 of [A-Za-z0-9_-]), not $LATEST: publish a version of the durable function", ErrBadSpec, qualifier)
	}
	return newDurable(awsCfg, function, qualifier, false, nil), nil
}

// FromEnv builds the target the deployed processor's environment names:
// TARGET (lambda:<function>, sqs:<queue URL>, sns:<topic ARN>,
// events:<bus>, states:<state machine ARN> or durable:<function>:<version
// or alias>), with TARGET_EVENT_SOURCE and TARGET_DETAIL_TYPE for a bus and
// TARGET_INVOCATION_TYPE (Event, the default, or RequestResponse) for a
// durable function.
// It returns nil, nil when TARGET is not set. A lambda target naming
// AWS_LAMBDA_FUNCTION_NAME, the processor's own function, is refused: every
// delivery would invoke the processor again. Errors name the variables.
func FromEnv(lookup func(name string) (string, bool), awsCfg aws.Config, logger *slog.Logger) (sqsonce.Target, error) {
	r := envconfig.NewReader(lookup)
	s := r.String("TARGET", "")
	source := r.String("TARGET_EVENT_SOURCE", "")
	detailType := r.String("TARGET_DETAIL_TYPE", "")
	invocationType := r.OneOf("TARGET_INVOCATION_TYPE", "Event", "Event", "RequestResponse")
	self := r.String("AWS_LAMBDA_FUNCTION_NAME", "")
	if s == "" {
		return nil, r.Err()
	}
	spec, want := parseSpec(s)
	switch {
	case want != "":
		// The words of someone who set a variable, without the package.
		r.Fail("TARGET", "invalid target %q: %s", s, want)
	case (spec.Kind == Lambda || spec.Kind == Durable) && self != "" && spec.FunctionName() == self:
		r.Fail("TARGET", "%s: the target is the processor's own function %s: every delivery would invoke the processor again", spec, self)
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	switch spec.Kind {
	case Lambda:
		return newFunction(awsCfg, spec.Dest, logger), nil
	case SQS:
		return newQueue(awsCfg, spec.Dest), nil
	case SNS:
		return newTopic(awsCfg, spec.Dest), nil
	case States:
		return newStateMachine(awsCfg, spec.Dest), nil
	case Durable:
		q := spec.Qualifier()
		return newDurable(awsCfg, strings.TrimSuffix(spec.Dest, ":"+q), q, invocationType == "RequestResponse", logger), nil
	}
	return newBus(awsCfg, spec.Dest, source, detailType), nil
}

// newFunction, newQueue, newTopic and newBus build the target of a valid
// destination, with clients from awsCfg whose retries back off at most
// retrybudget.MaxBackoff.
func newFunction(awsCfg aws.Config, function string, logger *slog.Logger) *LambdaTarget {
	api := lambda.NewFromConfig(awsCfg, func(o *lambda.Options) {
		o.Retryer = invokeRetryer()
		o.APIOptions = safeBody(o.APIOptions)
	})
	return &LambdaTarget{API: api, Function: function, Logger: logger}
}

func newDurable(awsCfg aws.Config, function, qualifier string, synchronous bool, logger *slog.Logger) *DurableTarget {
	api := lambda.NewFromConfig(awsCfg, func(o *lambda.Options) {
		o.Retryer = invokeRetryer()
		o.APIOptions = safeBody(o.APIOptions)
	})
	return &DurableTarget{API: api, Function: function, Qualifier: qualifier, Synchronous: synchronous, Logger: logger}
}

func newQueue(awsCfg aws.Config, queueURL string) *SQSTarget {
	api := sqs.NewFromConfig(awsCfg, func(o *sqs.Options) {
		o.Retryer = retrybudget.Client(o.Retryer)
		o.APIOptions = safeBody(o.APIOptions)
	})
	return &SQSTarget{API: api, QueueURL: queueURL}
}

func newTopic(awsCfg aws.Config, topicARN string) *SNSTarget {
	api := sns.NewFromConfig(awsCfg, func(o *sns.Options) {
		o.Retryer = retrybudget.Client(o.Retryer)
		o.APIOptions = safeBody(o.APIOptions)
	})
	return &SNSTarget{API: api, TopicARN: topicARN}
}

func newBus(awsCfg aws.Config, bus, source, detailType string) *EventsTarget {
	api := eventbridge.NewFromConfig(awsCfg, func(o *eventbridge.Options) {
		o.Retryer = retrybudget.Client(o.Retryer)
		o.APIOptions = safeBody(o.APIOptions)
	})
	return &EventsTarget{API: api, Bus: bus, Source: source, DetailType: detailType}
}

// CheckSource refuses to deliver the records of the queue t sends to: they
// would come back to the processor for ever. Its error, unlike the
// package's others, has no "targets: " prefix: the processor puts it after
// the setting's name (TARGET or ConsumerConfig.Target), where the reader set it.
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
