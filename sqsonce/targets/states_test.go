package targets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/smithy-go"

	"github.com/sqs-once/sqs-once/sqsonce"
)

const testStateMachine = "arn:aws:states:us-east-1:123456789012:stateMachine:orders"

// fakeStates is Step Functions as its documentation describes a start by
// name: a second start of an open execution with the same input succeeds
// and starts nothing; any other second start is ExecutionAlreadyExists.
type fakeStates struct {
	mu        sync.Mutex
	inputs    map[string]string // execution ARN → input
	closed    bool              // executions close at once
	starts    []string          // names, in call order
	describes []string          // execution ARNs
	startErr  func(name string) error
	descErr   error
}

func newFakeStates() *fakeStates { return &fakeStates{inputs: map[string]string{}} }

func (f *fakeStates) StartExecution(_ context.Context, in *sfn.StartExecutionInput, _ ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := aws.ToString(in.Name)
	f.starts = append(f.starts, name)
	if f.startErr != nil {
		if err := f.startErr(name); err != nil {
			return nil, err
		}
	}
	arn := executionARN(aws.ToString(in.StateMachineArn), name)
	if prev, ok := f.inputs[arn]; ok && (f.closed || prev != aws.ToString(in.Input)) {
		return nil, &sfntypes.ExecutionAlreadyExists{Message: aws.String("Execution Already Exists: '" + arn + "'")}
	}
	f.inputs[arn] = aws.ToString(in.Input)
	return &sfn.StartExecutionOutput{ExecutionArn: aws.String(arn)}, nil
}

func (f *fakeStates) DescribeExecution(_ context.Context, in *sfn.DescribeExecutionInput, _ ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	arn := aws.ToString(in.ExecutionArn)
	f.describes = append(f.describes, arn)
	if f.descErr != nil {
		return nil, f.descErr
	}
	input, ok := f.inputs[arn]
	if !ok {
		return nil, &sfntypes.ExecutionDoesNotExist{}
	}
	return &sfn.DescribeExecutionOutput{ExecutionArn: aws.String(arn), Input: aws.String(input)}, nil
}

// delivery is message id's delivery under key, as the n-th receive of it
// would carry it: its receipt handle, receive count and fence differ from
// one delivery to the next.
func delivery(id, key, body string, n int) sqsonce.Delivery {
	return sqsonce.Delivery{
		Record: events.SQSMessage{
			MessageId:     id,
			ReceiptHandle: fmt.Sprintf("rh-%s-%d", id, n),
			Body:          body,
			Attributes: map[string]string{
				"ApproximateReceiveCount":          fmt.Sprint(n),
				"SentTimestamp":                    "1700000000000",
				"ApproximateFirstReceiveTimestamp": "1700000000500",
			},
			MessageAttributes: map[string]events.SQSMessageAttribute{"k": {DataType: "String", StringValue: aws.String("v")}},
			EventSource:       "aws:sqs",
			EventSourceARN:    "arn:aws:sqs:us-east-1:123456789012:orders",
			AWSRegion:         "us-east-1",
		},
		Key:         key,
		Fence:       int64(n),
		RecordKey:   "rk:" + key, // as a hashed key would differ from Key
		PayloadHash: fmt.Sprintf("%x", []byte(body)),
	}
}

func stateMachine(api StatesAPI) *StateMachineTarget {
	return &StateMachineTarget{API: api, StateMachineARN: testStateMachine}
}

// One start per message, named after its RecordKey (not Key), with the
// message in Lambda's event shape and the sqsOnce member.
func TestStateMachineStartsOneNamedExecutionPerMessage(t *testing.T) {
	api := newFakeStates()
	msgs := []sqsonce.Delivery{delivery("m1", "order/1", `{"n":1}`, 1), delivery("m2", "order-2", `{"n":2}`, 1)}
	for i, err := range stateMachine(api).Deliver(context.Background(), msgs) {
		if err != nil {
			t.Errorf("message %d: %v", i, err)
		}
	}
	for _, m := range msgs {
		arn := executionARN(testStateMachine, stateMachineExecutionName(m.RecordKey))
		if !strings.HasPrefix(arn, "arn:aws:states:us-east-1:123456789012:execution:orders:") {
			t.Errorf("execution ARN %s", arn)
		}
		input, ok := api.inputs[arn]
		if !ok {
			t.Fatalf("no execution %s among %v", arn, api.starts)
		}
		var got struct {
			Records []map[string]any
			SQSOnce map[string]string `json:"sqsOnce"`
		}
		if err := json.Unmarshal([]byte(input), &got); err != nil {
			t.Fatalf("input %s: %v", input, err)
		}
		if len(got.Records) != 1 || got.Records[0]["body"] != m.Record.Body || got.Records[0]["messageId"] != m.Record.MessageId {
			t.Errorf("input %s: want the one record", input)
		}
		if got.SQSOnce["key"] != m.Key || got.SQSOnce["payloadHash"] != m.PayloadHash || len(got.SQSOnce) != 2 {
			t.Errorf("input %s: sqsOnce %v", input, got.SQSOnce)
		}
		if got.Records[0]["receiptHandle"] != "" || strings.Contains(input, "ApproximateReceiveCount") {
			t.Errorf("input %s carries what changes per delivery", input)
		}
		if !strings.Contains(input, "SentTimestamp") {
			t.Errorf("input %s lost the message's own attributes", input)
		}
	}
	if len(api.starts) != 2 || len(api.describes) != 0 {
		t.Errorf("starts %v describes %v", api.starts, api.describes)
	}
}

// Every delivery of one message sends the same input, byte for byte.
func TestStateMachineInputIsTheSameOnEveryDelivery(t *testing.T) {
	first, err := executionInput(delivery("m1", "k", "body", 1))
	if err != nil {
		t.Fatal(err)
	}
	for n := 2; n <= 5; n++ {
		again, err := executionInput(delivery("m1", "k", "body", n))
		if err != nil || string(again) != string(first) {
			t.Errorf("delivery %d: input %s, first %s (%v)", n, again, first, err)
		}
	}
	// Another payload under the key is another input.
	if other, _ := executionInput(delivery("m1", "k", "other", 1)); string(other) == string(first) {
		t.Error("another body, same input")
	}
}

// A redelivery after the start (a crash before the completion): the name
// is taken by this payload's execution, open or closed.
func TestStateMachineRedeliveryIsAlreadyStarted(t *testing.T) {
	for _, closed := range []bool{false, true} {
		api := newFakeStates()
		api.closed = closed
		tg := stateMachine(api)
		if err := tg.Deliver(context.Background(), []sqsonce.Delivery{delivery("m1", "k", "body", 1)})[0]; err != nil {
			t.Fatalf("first: %v", err)
		}
		err := tg.Deliver(context.Background(), []sqsonce.Delivery{delivery("m1", "k", "body", 2)})[0]
		if closed {
			// ExecutionAlreadyExists, looked up: this payload's.
			if !errors.Is(err, sqsonce.ErrAlreadyStarted) {
				t.Errorf("closed: %v, want ErrAlreadyStarted", err)
			}
			want := executionARN(testStateMachine, stateMachineExecutionName("rk:k"))
			if len(api.describes) != 1 || api.describes[0] != want {
				t.Errorf("describes %v, want %s", api.describes, want)
			}
		} else if err != nil {
			// Open with the same input: Step Functions answers success.
			t.Errorf("open: %v, want nil (same input)", err)
		}
		if len(api.inputs) != 1 {
			t.Errorf("%d executions, want 1", len(api.inputs))
		}
	}
	// A redrive (another message id, same key and body) differs in input
	// but not in payload: already started.
	api := newFakeStates()
	tg := stateMachine(api)
	tg.Deliver(context.Background(), []sqsonce.Delivery{delivery("m1", "k", "body", 1)})
	if err := tg.Deliver(context.Background(), []sqsonce.Delivery{delivery("m9", "k", "body", 1)})[0]; !errors.Is(err, sqsonce.ErrAlreadyStarted) {
		t.Errorf("redriven: %v, want ErrAlreadyStarted", err)
	}
}

// The name taken for another payload, or by an execution sqs-once did not
// start, is a payload mismatch, never already started.
func TestStateMachineAnotherPayloadIsAMismatch(t *testing.T) {
	api := newFakeStates()
	tg := stateMachine(api)
	tg.Deliver(context.Background(), []sqsonce.Delivery{delivery("m1", "k", "body", 1)})
	err := tg.Deliver(context.Background(), []sqsonce.Delivery{delivery("m2", "k", "another body", 1)})[0]
	if !errors.Is(err, sqsonce.ErrPayloadMismatch) || errors.Is(err, sqsonce.ErrAlreadyStarted) {
		t.Errorf("another payload: %v, want ErrPayloadMismatch", err)
	}
	for _, foreign := range []string{`{}`, `{"sqsOnce":null}`, `not json`, `{"sqsOnce":{"key":"k"}}`} {
		api := newFakeStates()
		d := delivery("m1", "k", "body", 1)
		api.inputs[executionARN(testStateMachine, stateMachineExecutionName(d.RecordKey))] = foreign
		api.closed = true
		err := stateMachine(api).Deliver(context.Background(), []sqsonce.Delivery{d})[0]
		if !errors.Is(err, sqsonce.ErrPayloadMismatch) {
			t.Errorf("existing input %s: %v, want ErrPayloadMismatch", foreign, err)
		}
	}
}

// A lookup that fails is retried: neither done, nor refused, nor unknown.
func TestStateMachineFailedLookupIsRetried(t *testing.T) {
	api := newFakeStates()
	api.closed = true
	tg := stateMachine(api)
	tg.Deliver(context.Background(), []sqsonce.Delivery{delivery("m1", "k", "body", 1)})
	api.descErr = &smithy.GenericAPIError{Code: "ThrottlingException", Fault: smithy.FaultClient}
	err := tg.Deliver(context.Background(), []sqsonce.Delivery{delivery("m1", "k", "body", 2)})[0]
	if err == nil || errors.Is(err, sqsonce.ErrAlreadyStarted) || errors.Is(err, sqsonce.ErrPayloadMismatch) ||
		errors.Is(err, sqsonce.ErrTargetRefused) || errors.Is(err, sqsonce.ErrOutcomeUnknown) {
		t.Errorf("%v, want a plain error to retry", err)
	}
}

func TestStateMachineErrors(t *testing.T) {
	for _, tt := range []struct {
		name    string
		err     error
		refused bool
	}{
		{"no such state machine", &sfntypes.StateMachineDoesNotExist{Message: aws.String("State Machine Does Not Exist")}, true},
		{"deleting", &sfntypes.StateMachineDeleting{}, true},
		{"invalid input", &sfntypes.InvalidExecutionInput{}, true},
		{"denied", &smithy.GenericAPIError{Code: "AccessDeniedException", Fault: smithy.FaultClient}, true},
		{"throttled", &smithy.GenericAPIError{Code: "ThrottlingException", Fault: smithy.FaultClient}, false},
		{"open executions quota", &sfntypes.ExecutionLimitExceeded{}, false},
		{"KMS throttled", &sfntypes.KmsThrottlingException{}, false},
		{"server error (the start may have happened)", &smithy.GenericAPIError{Code: "InternalFailure", Fault: smithy.FaultServer}, false},
		{"lost answer", context.DeadlineExceeded, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			api := newFakeStates()
			api.startErr = func(string) error { return tt.err }
			err := stateMachine(api).Deliver(context.Background(), []sqsonce.Delivery{delivery("m1", "k", "body", 1)})[0]
			if err == nil || errors.Is(err, sqsonce.ErrTargetRefused) != tt.refused {
				t.Errorf("%v, want refused %v", err, tt.refused)
			}
			// Never unknown: the next start of the name finds the first.
			if errors.Is(err, sqsonce.ErrOutcomeUnknown) {
				t.Errorf("%v: ErrOutcomeUnknown", err)
			}
		})
	}
	t.Run("input too large", func(t *testing.T) {
		api := newFakeStates()
		err := stateMachine(api).Deliver(context.Background(), []sqsonce.Delivery{delivery("m1", "k", strings.Repeat("x", MaxExecutionInputBytes), 1)})[0]
		if !errors.Is(err, sqsonce.ErrTargetRefused) || len(api.starts) != 0 {
			t.Errorf("%v after %d starts, want refused before any", err, len(api.starts))
		}
	})
}

// On a FIFO source a group's starts are in order, and stop at a failure;
// already started does not stop the group.
func TestStateMachineFIFOGroups(t *testing.T) {
	var msgs []sqsonce.Delivery
	for i := range 6 {
		d := delivery(fmt.Sprintf("m%d", i), fmt.Sprintf("k%d", i), fmt.Sprintf("b%d", i), 1)
		d.Record.EventSourceARN += ".fifo"
		d.Record.Attributes["MessageGroupId"] = fmt.Sprintf("g%d", i%2)
		msgs = append(msgs, d)
	}
	api := newFakeStates()
	api.closed = true
	// k0 was started before: already started, g0 goes on.
	stateMachine(api).Deliver(context.Background(), msgs[:1])
	api.starts = nil
	failing := stateMachineExecutionName(msgs[3].RecordKey) // g1's second
	api.startErr = func(name string) error {
		if name == failing {
			return &smithy.GenericAPIError{Code: "ThrottlingException", Fault: smithy.FaultClient}
		}
		return nil
	}
	errs := stateMachine(api).Deliver(context.Background(), msgs)
	if !errors.Is(errs[0], sqsonce.ErrAlreadyStarted) || errs[2] != nil || errs[4] != nil {
		t.Errorf("g0: %v", errs)
	}
	if errs[1] != nil || errs[3] == nil || !errors.Is(errs[5], ErrGroupBlocked) {
		t.Errorf("g1: %v", errs)
	}
	pos := map[string]int{}
	for i, n := range api.starts {
		pos[n] = i
	}
	name := func(i int) string { return stateMachineExecutionName(msgs[i].RecordKey) }
	if pos[name(0)] > pos[name(2)] || pos[name(2)] > pos[name(4)] || pos[name(1)] > pos[name(3)] {
		t.Errorf("starts out of group order: %v", api.starts)
	}
	if _, ok := pos[name(5)]; ok {
		t.Errorf("g1's message after the failure was started: %v", api.starts)
	}
}
