package ops_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/internal/ops"
)

// fakeStack is a stack with a processor function, as CloudFormation
// describes it; params are its parameters (nil: none, a template from
// before HashKeys).
type fakeStack struct {
	params     map[string]string
	noFunction bool
}

func (s fakeStack) DescribeStacks(context.Context, *cloudformation.DescribeStacksInput, ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error) {
	st := cftypes.Stack{StackName: aws.String("orders"), Outputs: []cftypes.Output{{OutputKey: aws.String("IdempotencyTableName"), OutputValue: aws.String("orders-idem")}}}
	for k, v := range s.params {
		st.Parameters = append(st.Parameters, cftypes.Parameter{ParameterKey: aws.String(k), ParameterValue: aws.String(v)})
	}
	return &cloudformation.DescribeStacksOutput{Stacks: []cftypes.Stack{st}}, nil
}

func (s fakeStack) ListStackResources(context.Context, *cloudformation.ListStackResourcesInput, ...func(*cloudformation.Options)) (*cloudformation.ListStackResourcesOutput, error) {
	if s.noFunction {
		return &cloudformation.ListStackResourcesOutput{}, nil
	}
	return &cloudformation.ListStackResourcesOutput{StackResourceSummaries: []cftypes.StackResourceSummary{
		{LogicalResourceId: aws.String("ProcessorFunction"), PhysicalResourceId: aws.String("orders-processor-fn")},
	}}, nil
}

// fakeFunction is the processor's configuration: env, or err (an operator
// without lambda:GetFunctionConfiguration); calls counts the reads.
type fakeFunction struct {
	env   map[string]string
	err   error
	calls *int
}

func (f fakeFunction) GetFunctionConfiguration(_ context.Context, in *lambda.GetFunctionConfigurationInput, _ ...func(*lambda.Options)) (*lambda.GetFunctionConfigurationOutput, error) {
	*f.calls++
	if aws.ToString(in.FunctionName) != "orders-processor-fn" {
		return nil, errors.New("not the stack's processor: " + aws.ToString(in.FunctionName))
	}
	if f.err != nil {
		return nil, f.err
	}
	return &lambda.GetFunctionConfigurationOutput{Environment: &lambdatypes.EnvironmentResponse{Variables: f.env}}, nil
}

// TestResolveHashKeys: whether the CLI hashes keys is the processor's
// HASH_KEYS read as the processor reads it, else the stack's HashKeys
// parameter, else off; a --hash-keys given, true or false, wins over all of
// them, and with --key-prefix too, the processor is not read at all.
func TestResolveHashKeys(t *testing.T) {
	t.Parallel()
	denied := errors.New("AccessDeniedException")
	for _, tt := range []struct {
		name      string
		flags     ops.Targets
		stack     fakeStack
		fn        fakeFunction
		want      bool
		from      string
		wantCalls int
	}{
		{name: "processor on", fn: fakeFunction{env: map[string]string{"HASH_KEYS": "on"}}, want: true, from: "processor environment", wantCalls: 1},
		{name: "processor on, padded", fn: fakeFunction{env: map[string]string{"HASH_KEYS": " on "}}, want: true, from: "processor environment", wantCalls: 1},
		{name: "processor off", stack: fakeStack{params: map[string]string{"HashKeys": "on"}}, fn: fakeFunction{env: map[string]string{"HASH_KEYS": "off"}}, want: false, from: "processor environment", wantCalls: 1},
		{name: "processor blank is unset", fn: fakeFunction{env: map[string]string{"HASH_KEYS": ""}}, want: false, from: "processor environment", wantCalls: 1},
		{name: "processor without HASH_KEYS", fn: fakeFunction{env: map[string]string{"KEY_PREFIX": "p"}}, want: false, from: "processor environment", wantCalls: 1},
		{name: "processor refuses its value", fn: fakeFunction{env: map[string]string{"HASH_KEYS": "ON"}}, want: false,
			from: `processor environment, where HASH_KEYS="ON" is not on or off and the processor refuses to start`, wantCalls: 1},
		{name: "processor unreadable, parameter on", stack: fakeStack{params: map[string]string{"HashKeys": "on"}}, fn: fakeFunction{err: denied}, want: true, from: "stack parameter (processor not readable)", wantCalls: 1},
		{name: "processor unreadable, parameter off", stack: fakeStack{params: map[string]string{"HashKeys": "off"}}, fn: fakeFunction{err: denied}, want: false, from: "stack parameter (processor not readable)", wantCalls: 1},
		{name: "processor unreadable, no parameter", fn: fakeFunction{err: denied}, want: false, from: "default (processor not readable)", wantCalls: 1},
		{name: "no processor", stack: fakeStack{noFunction: true, params: map[string]string{"HashKeys": "on"}}, want: true, from: "stack parameter (no processor in the stack)"},
		{name: "flag on wins", flags: ops.Targets{HashKeys: true, HashKeysFrom: "flag"}, fn: fakeFunction{env: map[string]string{"HASH_KEYS": "off"}}, want: true, from: "flag", wantCalls: 1},
		{name: "flag off wins", flags: ops.Targets{HashKeysFrom: "flag"}, stack: fakeStack{params: map[string]string{"HashKeys": "on"}}, fn: fakeFunction{env: map[string]string{"HASH_KEYS": "on"}}, want: false, from: "flag", wantCalls: 1},
		{name: "both flags: processor not read", flags: ops.Targets{HashKeys: true, HashKeysFrom: "flag", KeyPrefix: "p"}, fn: fakeFunction{err: denied}, want: true, from: "flag"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var calls int
			tt.fn.calls = &calls
			flags := tt.flags
			flags.Stack = "orders"
			got, err := ops.Resolve(context.Background(), tt.stack, tt.fn, flags)
			if err != nil {
				t.Fatal(err)
			}
			if got.HashKeys != tt.want || got.HashKeysFrom != tt.from {
				t.Errorf("HashKeys %t from %q, want %t from %q", got.HashKeys, got.HashKeysFrom, tt.want, tt.from)
			}
			if calls != tt.wantCalls {
				t.Errorf("%d reads of the processor, want %d", calls, tt.wantCalls)
			}
			if got.Table != "orders-idem" {
				t.Errorf("table %q: the stack's outputs were not read", got.Table)
			}
		})
	}
	// Without a stack, the CLI does not hash unless told to.
	got, err := ops.Resolve(context.Background(), nil, nil, ops.Targets{Table: "t", KeyPrefix: "p"})
	if err != nil || got.HashKeys || got.HashKeysFrom != "default" {
		t.Errorf("no stack, no flag: HashKeys %t from %q, %v; want false from default", got.HashKeys, got.HashKeysFrom, err)
	}
}

// TestKeyPrefixStillReadWithHashKeys: reading HASH_KEYS shares the one read
// of the processor with KEY_PREFIX, whose fallback is unchanged.
func TestKeyPrefixStillReadWithHashKeys(t *testing.T) {
	t.Parallel()
	var calls int
	got, err := ops.Resolve(context.Background(), fakeStack{}, fakeFunction{env: map[string]string{"KEY_PREFIX": "orders-v2", "HASH_KEYS": "on"}, calls: &calls}, ops.Targets{Stack: "orders"})
	if err != nil || got.KeyPrefix != "orders-v2" || got.KeyPrefixFrom != "processor environment" || !got.HashKeys || calls != 1 {
		t.Errorf("Resolve = %+v, %v after %d reads; want prefix orders-v2 and hashing from the processor, one read", got, err, calls)
	}
	calls = 0
	got, err = ops.Resolve(context.Background(), fakeStack{}, fakeFunction{err: errors.New("denied"), calls: &calls}, ops.Targets{Stack: "orders", HashKeysFrom: "flag"})
	if err != nil || got.KeyPrefix != "orders-processor" || got.KeyPrefixFrom != "stack default (processor not readable)" {
		t.Errorf("Resolve with the processor unreadable = %+v, %v", got, err)
	}
}

// Resolve reads the processor's TARGET, for inspect to name a states
// target's execution; a hashed key's execution is named after its hash.
func TestResolveTarget(t *testing.T) {
	t.Parallel()
	var calls int
	const target = "states:arn:aws:states:eu-west-1:123456789012:stateMachine:orders"
	got, err := ops.Resolve(context.Background(), fakeStack{}, fakeFunction{env: map[string]string{"TARGET": target}, calls: &calls}, ops.Targets{Stack: "orders"})
	if err != nil || got.Target != target {
		t.Errorf("Target %q (%v), want %s", got.Target, err, target)
	}
}
