//go:build integration

package targets_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// The states target against moto_server's Step Functions, through the
// real SDK client ToStateMachine builds: what moto_server does with a
// second start of a name (as Step Functions documents it: the same input
// while open is the same execution; closed, or another input, is
// ExecutionAlreadyExists), and what the target makes of it.
func TestStateMachineOnMoto(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	ctx := context.Background()
	c := sfn.NewFromConfig(cfg)
	sm, err := c.CreateStateMachine(ctx, &sfn.CreateStateMachineInput{
		Name:       aws.String(mototest.Name("orders")),
		Definition: aws.String(`{"StartAt":"Done","States":{"Done":{"Type":"Pass","End":true}}}`),
		RoleArn:    aws.String("arn:aws:iam::123456789012:role/states-orders"),
	})
	if err != nil {
		t.Fatal(err)
	}
	tg, err := targets.ToStateMachine(cfg, aws.ToString(sm.StateMachineArn))
	if err != nil {
		t.Fatal(err)
	}
	d := func(id, body string, receive int) sqsonce.Delivery {
		return sqsonce.Delivery{
			Record: events.SQSMessage{MessageId: id, ReceiptHandle: "rh-" + id + strconv.Itoa(receive), Body: body,
				Attributes:  map[string]string{"ApproximateReceiveCount": strconv.Itoa(receive)},
				EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders", AWSRegion: "us-east-1"},
			Key: "tenant/42", RecordKey: "tenant/42", Fence: int64(receive), PayloadHash: "hash-of-" + body,
		}
	}
	deliver := func(m sqsonce.Delivery) error { return tg.Deliver(ctx, []sqsonce.Delivery{m})[0] }

	if err := deliver(d("m1", "a", 1)); err != nil {
		t.Fatalf("first start: %v", err)
	}
	// Open, same input (the receipt handle and receive count differ but are
	// not in it): Step Functions answers with the execution.
	if err := deliver(d("m1", "a", 2)); err != nil {
		t.Fatalf("redelivery while open: %v, want nil (the same input)", err)
	}
	list, err := c.ListExecutions(ctx, &sfn.ListExecutionsInput{StateMachineArn: sm.StateMachineArn})
	if err != nil || len(list.Executions) != 1 {
		t.Fatalf("executions %v, %v; want 1", list, err)
	}
	exec := list.Executions[0]
	if name, _ := (targets.Spec{Kind: targets.States, Dest: aws.ToString(sm.StateMachineArn)}).ExecutionName("tenant/42"); aws.ToString(exec.Name) != name {
		t.Errorf("execution name %q, want %q", aws.ToString(exec.Name), name)
	}
	// Open, another body: refused by name, looked up, a mismatch.
	if err := deliver(d("m2", "b", 1)); !errors.Is(err, sqsonce.ErrPayloadMismatch) {
		t.Errorf("another body while open: %v, want ErrPayloadMismatch", err)
	}
	// Closed: refused by name whatever the input; this body's is already
	// started, another's a mismatch.
	if _, err := c.StopExecution(ctx, &sfn.StopExecutionInput{ExecutionArn: exec.ExecutionArn}); err != nil {
		t.Fatal(err)
	}
	if err := deliver(d("m1", "a", 3)); !errors.Is(err, sqsonce.ErrAlreadyStarted) {
		t.Errorf("redelivery after close: %v, want ErrAlreadyStarted", err)
	}
	if err := deliver(d("m2", "b", 2)); !errors.Is(err, sqsonce.ErrPayloadMismatch) {
		t.Errorf("another body after close: %v, want ErrPayloadMismatch", err)
	}
	list, err = c.ListExecutions(ctx, &sfn.ListExecutionsInput{StateMachineArn: sm.StateMachineArn})
	if err != nil || len(list.Executions) != 1 || list.Executions[0].Status != sfntypes.ExecutionStatusAborted {
		t.Fatalf("executions %+v, %v; want the one, stopped", list, err)
	}
}
