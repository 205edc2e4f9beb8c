package ops

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/smithy-go"
)

type fakeStates struct {
	typ sfntypes.StateMachineType
	err error
	arn string
}

func (f *fakeStates) DescribeStateMachine(_ context.Context, in *sfn.DescribeStateMachineInput, _ ...func(*sfn.Options)) (*sfn.DescribeStateMachineOutput, error) {
	f.arn = *in.StateMachineArn
	if f.err != nil {
		return nil, f.err
	}
	return &sfn.DescribeStateMachineOutput{Type: f.typ}, nil
}

const testMachine = "arn:aws:states:eu-west-1:123456789012:stateMachine:orders"

// preflight's state machine check: a standard one passes, an express one
// warns (it does not deduplicate by name), a missing or unreadable one fails.
func TestCheckStateMachine(t *testing.T) {
	for _, tt := range []struct {
		name   string
		api    *fakeStates
		status CheckStatus
		says   string
	}{
		{"standard", &fakeStates{typ: sfntypes.StateMachineTypeStandard}, CheckOK, "STANDARD"},
		{"express", &fakeStates{typ: sfntypes.StateMachineTypeExpress}, CheckWarn, "does not deduplicate"},
		{"missing", &fakeStates{err: &sfntypes.StateMachineDoesNotExist{}}, CheckFail, "no state machine"},
		{"denied", &fakeStates{err: &smithy.GenericAPIError{Code: "AccessDeniedException"}}, CheckFail, "cannot read it"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &Migration{Stack: "orders-once", Target: "states:" + testMachine}
			m.readStateMachine(context.Background(), tt.api)
			if tt.api.arn != testMachine {
				t.Errorf("described %q, want %s", tt.api.arn, testMachine)
			}
			var got *Check
			for _, c := range m.Checks() {
				if c.Name == checkStateMachineName {
					got = &c
				}
				if c.Name == checkTarget && c.Status != CheckOK {
					t.Errorf("target check %+v, want ok for a states target without a consumer", c)
				}
			}
			if got == nil || got.Status != tt.status || !strings.Contains(got.Detail, tt.says) {
				t.Errorf("check %+v, want %s saying %q", got, tt.status, tt.says)
			}
		})
	}
	// Another Target: no state machine read, no such check.
	m := &Migration{Stack: "orders-once", Target: "lambda:orders"}
	api := &fakeStates{err: errors.New("must not be called")}
	m.readStateMachine(context.Background(), api)
	if m.StateMachine != nil || api.arn != "" {
		t.Errorf("read a state machine for %s", m.Target)
	}
}

func TestExecutionOf(t *testing.T) {
	e := executionOf("states:"+testMachine, "tenant/42", "eu-west-1", nil)
	if e == nil || e.Name != "tenant_42-cfeec1e83cc4c080fe9f8aeedc33e8b5" ||
		e.ARN != "arn:aws:states:eu-west-1:123456789012:execution:orders:"+e.Name ||
		e.Lookup != "aws stepfunctions describe-execution --region eu-west-1 --execution-arn "+e.ARN {
		t.Errorf("executionOf = %+v", e)
	}
	for _, target := range []string{"", "lambda:orders", "not a target"} {
		if e := executionOf(target, "k", "", nil); e != nil {
			t.Errorf("executionOf(%q) = %+v, want nil", target, e)
		}
	}
}
