package targets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/sqs-once/sqs-once/internal/retrybudget"
	"github.com/sqs-once/sqs-once/sqsonce"
)

// DurableAPI is the Lambda calls a durable target makes: Invoke to start a
// key's execution and, when Lambda answers that the name is taken by
// another payload, the two reads that find the execution holding it and its
// input.
type DurableAPI interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
	ListDurableExecutionsByFunction(ctx context.Context, in *lambda.ListDurableExecutionsByFunctionInput, optFns ...func(*lambda.Options)) (*lambda.ListDurableExecutionsByFunctionOutput, error)
	GetDurableExecution(ctx context.Context, in *lambda.GetDurableExecutionInput, optFns ...func(*lambda.Options)) (*lambda.GetDurableExecutionOutput, error)
}

var _ DurableAPI = (*lambda.Client)(nil)

// DurableTarget starts one durable execution of a Lambda durable function
// per message: an Invoke whose DurableExecutionName is derived from the
// record's key (Delivery.RecordKey), with the input a states target starts
// an execution with: the message as a one-record SQS event in Lambda's
// shape, without what changes from one receive to the next, plus a member
// "sqsOnce" {"key", "payloadHash"}. The input is the same on every delivery
// of one message, so that Lambda, which answers a second Invoke of a name
// with the same payload by returning the execution it already has, starts
// the key's execution once.
//
// When Lambda refuses the name (DurableExecutionAlreadyStartedException: the
// name holds an execution started with another payload, such as another
// message of the same key and body, or of another body), the target reads
// that execution's input back: the same payload hash is
// sqsonce.ErrAlreadyStarted (the record completes), another is an error
// matching sqsonce.ErrPayloadMismatch.
type DurableTarget struct {
	API DurableAPI
	// Function is the function's name or ARN, without qualifier.
	Function string
	// Qualifier is the version or alias invoked: durable functions are
	// invoked by a qualified ARN, and $LATEST is refused (an execution's
	// replays would run whatever code was deployed last).
	Qualifier string
	// Synchronous invokes with RequestResponse: the record succeeds when the
	// execution has completed without an error, within Lambda's 15-minute
	// limit of a synchronous invocation and the processor's own timeout. The
	// default, asynchronous (Event), succeeds once Lambda has accepted the
	// start, and the execution runs up to its own ExecutionTimeout.
	Synchronous bool
	// Logger receives one line per execution that failed in synchronous
	// mode; nil: slog.Default().
	Logger *slog.Logger
}

// maxListPages bounds the pages of ListDurableExecutionsByFunction read to
// find one name: the name filter leaves a handful at most.
const maxListPages = 10

// Deliver starts each message's execution, callsInFlight at once; on a FIFO
// source, one after another, and a message group whose start failed starts
// none of its later messages (ErrGroupBlocked).
func (t *DurableTarget) Deliver(ctx context.Context, msgs []sqsonce.Delivery) []error {
	errs := make([]error, len(msgs))
	payloads := make([][]byte, len(msgs))
	for i, m := range msgs {
		payloads[i], errs[i] = durablePayload(m)
		if errs[i] != nil {
			errs[i] = refused(errs[i])
		}
	}
	if len(msgs) == 0 || !isFIFOSource(msgs[0].Record.EventSourceARN) {
		var each [][]int
		for i := range msgs {
			if errs[i] == nil {
				each = append(each, []int{i})
			}
		}
		sendAll(each, nil, func(b []int) { errs[b[0]] = t.start(ctx, msgs[b[0]], payloads[b[0]]) })
		return errs
	}
	failedGroups := map[string]bool{}
	for i, m := range msgs {
		switch {
		case errs[i] != nil:
		case failedGroups[groupOf(m)]:
			errs[i] = ErrGroupBlocked
		default:
			errs[i] = t.start(ctx, m, payloads[i])
		}
		if errs[i] != nil && !errors.Is(errs[i], sqsonce.ErrAlreadyStarted) {
			failedGroups[groupOf(m)] = true
		}
	}
	return errs
}

// durablePayload is the input a durable target starts m's execution with:
// a states target's (executionInput), the same bytes on every delivery of
// m; a delivery without its record's key is refused, as it names nothing.
func durablePayload(m sqsonce.Delivery) ([]byte, error) {
	if m.RecordKey == "" {
		return nil, errors.New("targets: a durable target needs the record's key (Delivery.RecordKey) to name its execution")
	}
	return executionInput(m)
}

// start invokes m's execution and says what became of it.
func (t *DurableTarget) start(ctx context.Context, m sqsonce.Delivery, payload []byte) error {
	name := durableExecutionName(m.RecordKey)
	typ := lambdatypes.InvocationTypeEvent
	if t.Synchronous {
		typ = lambdatypes.InvocationTypeRequestResponse
	}
	out, err := t.API.Invoke(ctx, &lambda.InvokeInput{
		FunctionName:         aws.String(t.Function),
		Qualifier:            aws.String(t.Qualifier),
		DurableExecutionName: aws.String(name),
		InvocationType:       typ,
		Payload:              payload,
	}, func(o *lambda.Options) { o.Retryer = retrybudget.Within(ctx, o.Retryer) })
	if err != nil {
		var taken *lambdatypes.DurableExecutionAlreadyStartedException
		if errors.As(err, &taken) {
			return t.judge(ctx, m, name)
		}
		return durableCallError(fmt.Errorf("targets: Invoke %s:%s, execution %s: %w", t.Function, t.Qualifier, name, err))
	}
	if out.FunctionError != nil {
		t.log().WarnContext(ctx, "durable execution returned an error",
			"function", t.Function, "qualifier", t.Qualifier, "execution", name,
			"functionError", aws.ToString(out.FunctionError), "response", quote(out.Payload))
		return fmt.Errorf("%w (%s), execution %s: %s", ErrFunctionError, aws.ToString(out.FunctionError), name, quote(out.Payload))
	}
	return nil
}

// durableCallError is the error of a failed Invoke: refused when Lambda
// will never take it; otherwise to retry, even when the function may have
// run. Unlike a lambda target's, a lost answer need not keep the lock:
// the execution's name makes the next delivery's Invoke return the
// execution already started instead of starting a second one.
func durableCallError(err error) error {
	if classify(err, true) == rejected {
		return refused(err)
	}
	return err
}

// judge tells, for a name Lambda refused as taken, whose execution holds
// it: this payload's (ErrAlreadyStarted) or another's (ErrPayloadMismatch).
// Lambda refuses a name only for another payload, and this target's payload
// differs between two messages of one key and body (their message ids), so
// the payload hash in the execution's input decides, not Lambda's refusal.
func (t *DurableTarget) judge(ctx context.Context, m sqsonce.Delivery, name string) error {
	exec, err := t.find(ctx, name)
	if err != nil {
		return fmt.Errorf("targets: Lambda answered that durable execution %s already exists; reading it: %w", name, err)
	}
	if exec.InputPayload == nil {
		return fmt.Errorf("targets: Lambda answered that durable execution %s already exists and returned no input to compare", name)
	}
	var in struct {
		Meta *startMeta `json:"sqsOnce"`
	}
	_ = json.Unmarshal([]byte(*exec.InputPayload), &in)
	if in.Meta == nil || in.Meta.PayloadHash != m.PayloadHash {
		return fmt.Errorf("%w: durable execution %s (%s) was started with another payload", sqsonce.ErrPayloadMismatch, aws.ToString(exec.DurableExecutionArn), exec.Status)
	}
	if t.Synchronous && exec.Status != lambdatypes.ExecutionStatusSucceeded && exec.Status != lambdatypes.ExecutionStatusRunning {
		// Synchronous mode promises a record done only when its execution
		// succeeded: a failed one is this key's, and a failure.
		return fmt.Errorf("%w: durable execution %s of this payload ended %s", ErrFunctionError, aws.ToString(exec.DurableExecutionArn), exec.Status)
	}
	return fmt.Errorf("%w: durable execution %s (%s)", sqsonce.ErrAlreadyStarted, aws.ToString(exec.DurableExecutionArn), exec.Status)
}

// errNoExecution: Lambda refused a name that no listing shows.
var errNoExecution = errors.New("no execution of that name is listed")

// find is the execution named name, with its input. It lists the target's
// qualifier first, then every version: an alias moved since the start
// lists under another version, and the documentation does not settle what
// a listing without qualifier covers. The name filter matches names that
// contain it: the exact name is picked out.
func (t *DurableTarget) find(ctx context.Context, name string) (*lambda.GetDurableExecutionOutput, error) {
	opt := func(o *lambda.Options) {
		// Reads may be retried: they start nothing.
		o.Retryer = retrybudget.Within(ctx, retrybudget.Client(retry.NewStandard()))
	}
	for _, q := range []*string{aws.String(t.Qualifier), nil} {
		var marker *string
		for range maxListPages {
			out, err := t.API.ListDurableExecutionsByFunction(ctx, &lambda.ListDurableExecutionsByFunctionInput{
				FunctionName:         aws.String(t.Function),
				Qualifier:            q,
				DurableExecutionName: aws.String(name),
				Marker:               marker,
			}, opt)
			if err != nil {
				return nil, err
			}
			for _, e := range out.DurableExecutions {
				if aws.ToString(e.DurableExecutionName) == name && e.DurableExecutionArn != nil {
					return t.API.GetDurableExecution(ctx, &lambda.GetDurableExecutionInput{
						DurableExecutionArn:  e.DurableExecutionArn,
						IncludeExecutionData: aws.Bool(true),
					}, opt)
				}
			}
			if aws.ToString(out.NextMarker) == "" {
				break
			}
			marker = out.NextMarker
		}
	}
	return nil, errNoExecution
}

func (t *DurableTarget) log() *slog.Logger {
	if t.Logger != nil {
		return t.Logger
	}
	return slog.Default()
}
