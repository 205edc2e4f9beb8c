package ops

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// StatesAPI is the part of the Step Functions client preflight uses: it
// reads the state machine a states target names.
type StatesAPI interface {
	DescribeStateMachine(ctx context.Context, in *sfn.DescribeStateMachineInput, optFns ...func(*sfn.Options)) (*sfn.DescribeStateMachineOutput, error)
}

var _ StatesAPI = (*sfn.Client)(nil)

// StateMachine is the state machine the stack's Target names, as
// preflight read it.
type StateMachine struct {
	ARN string `json:"arn"`
	// Type is STANDARD or EXPRESS; "" when it could not be read.
	Type string `json:"type,omitempty"`
	// Missing: Step Functions says there is no such state machine.
	Missing bool `json:"missing,omitempty"`
	// Unread is why it could not be read otherwise (denied, throttled).
	Unread string `json:"unread,omitempty"`
}

// checkStateMachineName is the check of a states target.
const checkStateMachineName = "state machine"

// readStateMachine reads the state machine of a states Target; it does
// nothing for another Target. A failed read is recorded for the check,
// not returned: the other checks still run.
func (m *Migration) readStateMachine(ctx context.Context, api StatesAPI) {
	spec, err := targets.ParseSpec(m.Target)
	if err != nil || spec.Kind != targets.States {
		return
	}
	sm := &StateMachine{ARN: spec.Dest}
	m.StateMachine = sm
	out, err := api.DescribeStateMachine(ctx, &sfn.DescribeStateMachineInput{StateMachineArn: aws.String(spec.Dest)})
	var missing *sfntypes.StateMachineDoesNotExist
	switch {
	case errors.As(err, &missing):
		sm.Missing = true
	case err != nil:
		sm.Unread = awsError("describe state machine "+spec.Dest, err).Error()
	default:
		sm.Type = string(out.Type)
	}
}

// checkStateMachine judges a states target's state machine: it must
// exist; a standard one deduplicates starts by name (for 90 days after an
// execution closes), an express one does not, which preflight says loudly.
func (m *Migration) checkStateMachine() Check {
	c := Check{Name: checkStateMachineName}
	sm := m.StateMachine
	switch {
	case sm.Missing:
		c.Status, c.Detail = CheckFail, fmt.Sprintf("no state machine %s%s: every message would be refused to the operator queue", sm.ARN, inRegion(m.Region))
		c.Change = []string{"create the state machine, or deploy the stack with Target=states:<the ARN of one that exists>"}
	case sm.Unread != "":
		c.Status, c.Detail = CheckFail, "cannot read it: "+sm.Unread
		c.Change = []string{"run preflight with states:DescribeStateMachine on " + sm.ARN}
	case sm.Type == string(sfntypes.StateMachineTypeExpress):
		c.Status = CheckWarn
		c.Detail = fmt.Sprintf("%s is an EXPRESS state machine: Step Functions does not deduplicate express executions by name, so a processor that crashes between the start and its completion starts the key's execution again on the redelivery (the lock alone still holds every other duplicate back)", sm.ARN)
		c.Change = []string{"use a STANDARD state machine for one execution per key, or make the workflow idempotent itself"}
	default:
		c.Status, c.Detail = CheckOK, fmt.Sprintf("%s is a %s state machine: a start whose name is taken starts nothing, for 90 days after that execution closes", sm.ARN, sm.Type)
	}
	return c
}

// Execution is the named execution a key's messages start, for a Target
// that starts one per key (states:<ARN>), with how to look it up.
type Execution struct {
	Name string `json:"name"`
	ARN  string `json:"arn,omitempty"`
	// Lookup is the AWS CLI command that shows it.
	Lookup string `json:"lookup,omitempty"`
}

// executionOf is the execution target (a TARGET value) starts for the
// record key recordKey (the key, or its hash under HashKeys); nil for a
// target that starts none, or an unknown one.
func executionOf(target, recordKey, region string, endpoints Endpoints) *Execution {
	spec, err := targets.ParseSpec(target)
	if err != nil {
		return nil
	}
	name, ok := spec.ExecutionName(recordKey)
	if !ok {
		return nil
	}
	if spec.Kind == targets.Durable {
		return durableExecution(spec, name, awsFlags("lambda", region, endpoints))
	}
	e := &Execution{Name: name}
	if spec.Kind == targets.States {
		// arn:...:stateMachine:<machine> → arn:...:execution:<machine>:<name>
		e.ARN = strings.Replace(spec.Dest, ":stateMachine:", ":execution:", 1) + ":" + name
		e.Lookup = "aws stepfunctions describe-execution" + awsFlags("stepfunctions", region, endpoints) + " --execution-arn " + e.ARN
	}
	return e
}
