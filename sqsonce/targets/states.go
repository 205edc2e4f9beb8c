package targets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/smithy-go"

	"github.com/sqs-once/sqs-once/internal/retrybudget"
	"github.com/sqs-once/sqs-once/sqsonce"
)

// StatesAPI is the Step Functions calls a state machine target makes.
type StatesAPI interface {
	StartExecution(ctx context.Context, in *sfn.StartExecutionInput, optFns ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error)
	DescribeExecution(ctx context.Context, in *sfn.DescribeExecutionInput, optFns ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error)
}

var _ StatesAPI = (*sfn.Client)(nil)

// MaxExecutionInputBytes is Step Functions' limit on an execution's input
// (256 KiB, in UTF-8 bytes); a message whose input would be larger is
// refused.
const MaxExecutionInputBytes = 256 << 10

// StateMachineTarget starts one execution of a state machine per message,
// named after the message's key (its Delivery.RecordKey, mapped to Step
// Functions' alphabet and length: see docs/targets.md), so that a key's
// execution starts once while Step Functions keeps the name (90 days after
// a standard execution closes). Express state machines do not keep names:
// every start of one runs.
//
// The input is the message in Lambda's SQS event shape, {"Records":[...]},
// without what changes from one delivery of the message to the next (the
// receipt handle, the ApproximateReceiveCount attribute), plus a member
// "sqsOnce": {"key": ..., "payloadHash": ...}: the SHA-256 of the body that
// tells, when the name is already taken, whether its execution was started
// for this payload (sqsonce.ErrAlreadyStarted) or another one (an error
// matching sqsonce.ErrPayloadMismatch).
type StateMachineTarget struct {
	API StatesAPI
	// StateMachineARN is arn:aws:states:<region>:<account>:stateMachine:<name>.
	StateMachineARN string
}

// ToStateMachine is the target that starts an execution of the state
// machine stateMachineARN per message; its client comes from awsCfg. A
// stateMachineARN that is not a state machine's ARN is an error matching
// ErrBadSpec.
func ToStateMachine(awsCfg aws.Config, stateMachineARN string) (*StateMachineTarget, error) {
	if err := checkArg("ToStateMachine", "stateMachineARN", States, stateMachineARN); err != nil {
		return nil, err
	}
	return newStateMachine(awsCfg, stateMachineARN), nil
}

// newStateMachine builds the target of a valid ARN. Unlike an Invoke, a
// StartExecution may be retried by the SDK after a lost answer: a second
// start of the name finds the first (ExecutionAlreadyExists, or success
// for an open execution of the same input) and starts nothing.
func newStateMachine(awsCfg aws.Config, stateMachineARN string) *StateMachineTarget {
	api := sfn.NewFromConfig(awsCfg, func(o *sfn.Options) {
		o.Retryer = retrybudget.Client(o.Retryer)
	})
	return &StateMachineTarget{API: api, StateMachineARN: stateMachineARN}
}

// startMeta is the "sqsOnce" member of an execution's input.
type startMeta struct {
	Key         string `json:"key"`
	PayloadHash string `json:"payloadHash"`
}

// executionInput is the input of m's execution: the same bytes on every
// delivery of m.
func executionInput(m sqsonce.Delivery) ([]byte, error) {
	rec := m.Record
	rec.ReceiptHandle = "" // a new one on every receive
	if _, ok := rec.Attributes["ApproximateReceiveCount"]; ok {
		attrs := make(map[string]string, len(rec.Attributes))
		for k, v := range rec.Attributes {
			if k != "ApproximateReceiveCount" {
				attrs[k] = v
			}
		}
		rec.Attributes = attrs
	}
	record, err := encodeRecord(rec)
	if err != nil {
		return nil, err
	}
	meta, err := json.Marshal(startMeta{Key: m.Key, PayloadHash: m.PayloadHash})
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(eventPrefix)+len(record)+len(`],"sqsOnce":}`)+len(meta))
	out = append(out, eventPrefix...)
	out = append(out, record...)
	out = append(out, `],"sqsOnce":`...)
	out = append(out, meta...)
	return append(out, '}'), nil
}

// Deliver starts the messages' executions, callsInFlight at once. On a FIFO
// source a message group's are started in order, and a message whose
// group's earlier start failed is not started (ErrGroupBlocked).
func (t *StateMachineTarget) Deliver(ctx context.Context, msgs []sqsonce.Delivery) []error {
	errs := make([]error, len(msgs))
	fifo := len(msgs) > 0 && isFIFOSource(msgs[0].Record.EventSourceARN)
	var order []string
	groups := map[string][]int{}
	for i, m := range msgs {
		g := fmt.Sprint(i) // a standard source: every message on its own
		if fifo {
			g = groupOf(m)
		}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], i)
	}
	slots := make(chan struct{}, callsInFlight)
	var wg sync.WaitGroup
	for _, g := range order {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			blocked := false
			for _, i := range groups[g] {
				if blocked {
					errs[i] = ErrGroupBlocked
					continue
				}
				errs[i] = t.start(ctx, msgs[i])
				blocked = errs[i] != nil && !errors.Is(errs[i], sqsonce.ErrAlreadyStarted)
			}
		})
	}
	wg.Wait()
	return errs
}

// start starts m's execution and says what became of it.
func (t *StateMachineTarget) start(ctx context.Context, m sqsonce.Delivery) error {
	name := stateMachineExecutionName(m.RecordKey)
	input, err := executionInput(m)
	switch {
	case err != nil:
		return refused(fmt.Errorf("targets: encode the execution input: %w", err))
	case len(input) > MaxExecutionInputBytes:
		return refused(fmt.Errorf("targets: the execution input is %d bytes, over Step Functions' %d", len(input), MaxExecutionInputBytes))
	}
	_, err = t.API.StartExecution(ctx, &sfn.StartExecutionInput{
		StateMachineArn: aws.String(t.StateMachineARN),
		Name:            aws.String(name),
		Input:           aws.String(string(input)),
	}, withinStates(ctx))
	var exists *sfntypes.ExecutionAlreadyExists
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exists):
		return t.judgeExisting(ctx, name, m.PayloadHash)
	}
	return statesError(fmt.Errorf("targets: StartExecution %s name %s: %w", t.StateMachineARN, name, err))
}

// judgeExisting looks up the execution that holds name: started for
// payloadHash, it is this message's (sqsonce.ErrAlreadyStarted); for
// another payload, or not by sqs-once, a payload mismatch. A lookup that
// fails is retried.
func (t *StateMachineTarget) judgeExisting(ctx context.Context, name, payloadHash string) error {
	arn := executionARN(t.StateMachineARN, name)
	out, err := t.API.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)}, withinStates(ctx))
	if err != nil {
		// Not ErrOutcomeUnknown: the execution exists, the next delivery
		// looks again.
		return fmt.Errorf("targets: execution %s exists; DescribeExecution: %w", arn, err)
	}
	var in struct {
		SQSOnce *startMeta `json:"sqsOnce"`
	}
	if json.Unmarshal([]byte(aws.ToString(out.Input)), &in) != nil || in.SQSOnce == nil {
		return fmt.Errorf("%w: execution %s exists and was not started by sqs-once", sqsonce.ErrPayloadMismatch, arn)
	}
	if in.SQSOnce.PayloadHash != payloadHash {
		return fmt.Errorf("%w: execution %s was started for payload %s, this message's is %s", sqsonce.ErrPayloadMismatch, arn, in.SQSOnce.PayloadHash, payloadHash)
	}
	return sqsonce.ErrAlreadyStarted
}

// executionARN is the ARN of the execution name of the state machine
// stateMachineARN: arn:<partition>:states:<region>:<account>:execution:<state machine>:<name>.
func executionARN(stateMachineARN, name string) string {
	return strings.Replace(stateMachineARN, ":stateMachine:", ":execution:", 1) + ":" + name
}

func withinStates(ctx context.Context) func(*sfn.Options) {
	return func(o *sfn.Options) { o.Retryer = retrybudget.Within(ctx, o.Retryer) }
}

// statesRetryCodes are Step Functions' 4xx answers that say "not now":
// the open executions quota, KMS throttling.
var statesRetryCodes = map[string]bool{
	"ExecutionLimitExceeded": true,
	"KmsThrottlingException": true,
}

// statesError is the error of a StartExecution that failed: refused for
// good (denied, no such state machine, input invalid or too large), else
// retried. Never ErrOutcomeUnknown, even for a lost answer: the start may
// have happened, but the next delivery starts the same name and finds it.
func statesError(err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) && statesRetryCodes[ae.ErrorCode()] {
		return err
	}
	if classify(err, false) == rejected {
		return refused(err)
	}
	return err
}
