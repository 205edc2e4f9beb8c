package ops

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go"
)

// fakeDurable answers GetFunctionConfiguration for one function.
type fakeDurable struct {
	out            *lambda.GetFunctionConfigurationOutput
	err            error
	name, qualfier string
}

func (f *fakeDurable) GetFunctionConfiguration(_ context.Context, in *lambda.GetFunctionConfigurationInput, _ ...func(*lambda.Options)) (*lambda.GetFunctionConfigurationOutput, error) {
	f.name, f.qualfier = aws.ToString(in.FunctionName), aws.ToString(in.Qualifier)
	return f.out, f.err
}

func durableConfig(timeout, execution int32) *lambda.GetFunctionConfigurationOutput {
	out := &lambda.GetFunctionConfigurationOutput{Version: aws.String("3"), Timeout: aws.Int32(timeout)}
	if execution >= 0 {
		out.DurableConfig = &lambdatypes.DurableConfig{ExecutionTimeout: aws.Int32(execution)}
	}
	return out
}

// preflight's durable function check: the version or alias must exist and
// be durable; a synchronous start must fit the processor's timeout.
func TestCheckDurable(t *testing.T) {
	const target = "durable:arn:aws:lambda:eu-west-1:123456789012:function:orders:live"
	for _, tt := range []struct {
		name       string
		api        *fakeDurable
		invocation string
		timeout    int
		status     CheckStatus
		says       string
	}{
		{"async", &fakeDurable{out: durableConfig(60, 86400)}, "Event", 30, CheckOK, "started asynchronously"},
		{"sync fits", &fakeDurable{out: durableConfig(60, 120)}, "RequestResponse", 180, CheckOK, "waits for each execution, up to 120 s"},
		{"sync too long", &fakeDurable{out: durableConfig(60, 86400)}, "RequestResponse", 300, CheckWarn, "up to 900 s"},
		{"sync short execution, short processor", &fakeDurable{out: durableConfig(60, 120)}, "RequestResponse", 120, CheckWarn, "(134 s needed)"},
		{"not durable", &fakeDurable{out: durableConfig(60, -1)}, "Event", 30, CheckFail, "no DurableConfig"},
		{"missing", &fakeDurable{err: &lambdatypes.ResourceNotFoundException{}}, "Event", 30, CheckFail, "no function"},
		{"denied", &fakeDurable{err: &smithy.GenericAPIError{Code: "AccessDeniedException"}}, "Event", 30, CheckFail, "cannot read it"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &Migration{Stack: "orders-once", Target: target, ProcessorTimeoutSeconds: tt.timeout,
				Processor: &Function{env: map[string]string{envInvocationType: tt.invocation}}}
			m.readDurable(context.Background(), tt.api)
			if tt.api.name != "arn:aws:lambda:eu-west-1:123456789012:function:orders" || tt.api.qualfier != "live" {
				t.Errorf("read %q qualifier %q, want the function at its alias", tt.api.name, tt.api.qualfier)
			}
			var got *Check
			for _, c := range m.Checks() {
				if c.Name == checkDurableName {
					got = &c
				}
				if c.Name == checkTarget && c.Status != CheckOK {
					t.Errorf("target check %+v, want ok for a durable target without a consumer", c)
				}
			}
			if got == nil || got.Status != tt.status || !strings.Contains(got.Detail, tt.says) {
				t.Errorf("check %+v, want %s saying %q", got, tt.status, tt.says)
			}
		})
	}
	m := &Migration{Stack: "orders-once", Target: "lambda:orders"}
	api := &fakeDurable{err: errors.New("must not be called")}
	m.readDurable(context.Background(), api)
	if m.Durable != nil || api.name != "" {
		t.Errorf("read a durable function for %s", m.Target)
	}
}

// An unqualified durable Target (set on the function by hand: the
// template refuses it) fails the target check with the fix.
func TestCheckTargetUnqualifiedDurable(t *testing.T) {
	m := &Migration{Stack: "orders-once", Target: "durable:orders"}
	m.readDurable(context.Background(), &fakeDurable{err: errors.New("must not be called")})
	c := m.checkTarget()
	if c.Status != CheckFail || !strings.Contains(c.Detail, "names no version or alias") || m.Durable != nil {
		t.Errorf("check %+v, want a failure saying how to qualify it", c)
	}
}

func TestDurableExecutionOf(t *testing.T) {
	e := executionOf("durable:orders:live", "tenant/42", "eu-west-1", nil)
	if e == nil || e.Name != "tenant_42-cfeec1e83cc4c080fe9f8aeedc33e8b5" ||
		e.Lookup != "aws lambda list-durable-executions-by-function --region eu-west-1 --function-name orders --qualifier live --durable-execution-name "+e.Name {
		t.Errorf("executionOf = %+v", e)
	}
	if e := executionOf("durable:orders", "k", "", nil); e != nil {
		t.Errorf("an unqualified durable target: %+v, want nil", e)
	}
}
