package ops

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/smithy-go"
)

// Targets are the resources the commands act on.
type Targets struct {
	Stack         string `json:"stack,omitempty"`
	MainQueue     string `json:"mainQueueUrl,omitempty"`
	DeadLetter    string `json:"deadLetterQueueUrl,omitempty"`
	OperatorQueue string `json:"operatorQueueUrl,omitempty"`
	Table         string `json:"tableName,omitempty"`
	KeyPrefix     string `json:"keyPrefix,omitempty"`
	// KeyPrefixFrom says where KeyPrefix came from, for the operator to
	// judge it: "flag", "processor environment" or "stack default".
	KeyPrefixFrom string `json:"keyPrefixFrom,omitempty"`
	// Region is the region of the calls, for messages ("" when unknown).
	Region string `json:"region,omitempty"`
}

// The stack's outputs (template.yaml) and the processor's logical id.
const (
	outputMainQueue     = "MainQueueUrl"
	outputDeadLetter    = "DeadLetterQueueUrl"
	outputOperatorQueue = "OperatorQueueUrl"
	outputTable         = "IdempotencyTableName"
	processorLogicalID  = "ProcessorFunction"
	envKeyPrefix        = "KEY_PREFIX"
)

// Resolve fills what flags left empty from the stack's CloudFormation
// outputs, and the key prefix from the processor's own KEY_PREFIX: the
// template derives it from the stack name unless KeyPrefix is set, and only
// the deployed function knows which. Flags win over the stack.
func Resolve(ctx context.Context, cf StackAPI, fn FunctionAPI, flags Targets) (Targets, error) {
	t := flags
	if t.KeyPrefix != "" {
		t.KeyPrefixFrom = "flag"
	}
	if t.Stack == "" {
		return t, nil
	}
	st, err := describeStack(ctx, cf, t.Stack, t.Region)
	if err != nil {
		return t, err
	}
	outputs := stackOutputs(st)
	fill := func(dst *string, key string) {
		if *dst == "" {
			*dst = outputs[key]
		}
	}
	fill(&t.MainQueue, outputMainQueue)
	fill(&t.DeadLetter, outputDeadLetter)
	fill(&t.OperatorQueue, outputOperatorQueue)
	fill(&t.Table, outputTable)
	if t.KeyPrefix == "" {
		t.KeyPrefix, t.KeyPrefixFrom = stackKeyPrefix(ctx, cf, fn, t.Stack)
	}
	return t, nil
}

// inRegion is " in region R", or "" when the region is unknown.
func inRegion(region string) string {
	if region == "" {
		return ""
	}
	return " in region " + region
}

// describeStack reads the stack, its outputs and parameters. A stack that
// does not exist is ErrNotFound, named with the region looked in: the
// usual cause is the wrong region or account.
func describeStack(ctx context.Context, cf StackAPI, stack, region string) (cftypes.Stack, error) {
	out, err := cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(stack)})
	if err != nil {
		// CloudFormation says a stack is missing with a ValidationError
		// whose message says so; there is no error type of its own.
		var api smithy.APIError
		if errors.As(err, &api) && api.ErrorCode() == "ValidationError" && strings.Contains(api.ErrorMessage(), "does not exist") {
			return cftypes.Stack{}, fmt.Errorf("stack %s%s: %w: %w", stack, inRegion(region), ErrNotFound, err)
		}
		return cftypes.Stack{}, awsError("describe stack "+stack+inRegion(region), err)
	}
	if len(out.Stacks) == 0 {
		return cftypes.Stack{}, fmt.Errorf("stack %s%s: %w", stack, inRegion(region), ErrNotFound)
	}
	return out.Stacks[0], nil
}

// stackOutputs are the stack's outputs by key.
func stackOutputs(st cftypes.Stack) map[string]string {
	outputs := map[string]string{}
	for _, o := range st.Outputs {
		outputs[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	return outputs
}

// stackResources maps the stack's logical resource ids to their physical
// ids. ListStackResources rather than DescribeStackResource: moto_server
// has only the former, and AWS has both.
func stackResources(ctx context.Context, cf StackAPI, stack string) (map[string]string, error) {
	ids := map[string]string{}
	p := cloudformation.NewListStackResourcesPaginator(cf, &cloudformation.ListStackResourcesInput{StackName: aws.String(stack)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, awsError("list the resources of stack "+stack, err)
		}
		for _, r := range page.StackResourceSummaries {
			if id := aws.ToString(r.LogicalResourceId); id != "" {
				ids[id] = aws.ToString(r.PhysicalResourceId)
			}
		}
	}
	return ids, nil
}

// stackKeyPrefix reads KEY_PREFIX from the processor's environment. Reading
// it needs lambda:GetFunctionConfiguration, which an operator's role may
// lack: then it falls back on the template's default, "<stack>-processor",
// and says so, rather than failing a read-only command.
func stackKeyPrefix(ctx context.Context, cf StackAPI, fn FunctionAPI, stack string) (prefix, from string) {
	fallback := stack + "-processor"
	ids, err := stackResources(ctx, cf, stack)
	if err != nil {
		return fallback, "stack default (processor not readable)"
	}
	physical, ok := ids[processorLogicalID]
	if !ok {
		return fallback, "stack default (no processor in the stack)"
	}
	conf, err := fn.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{
		FunctionName: aws.String(physical),
	})
	if err != nil || conf.Environment == nil {
		return fallback, "stack default (processor not readable)"
	}
	if p := strings.TrimSpace(conf.Environment.Variables[envKeyPrefix]); p != "" {
		return p, "processor environment"
	}
	return fallback, "stack default"
}

// need returns the value, or a usage error naming the flag that gives it.
func need(value, what, flag string) (string, error) {
	if value == "" {
		return "", fmt.Errorf("%w: no %s: give --stack, or %s", ErrUsage, what, flag)
	}
	return value, nil
}

// Queue resolves a queue argument: "main", "dlq", "operator" or a URL.
func (t Targets) Queue(name string) (string, error) {
	switch name {
	case "main":
		return need(t.MainQueue, "main queue", "--main-queue URL")
	case "dlq":
		return need(t.DeadLetter, "dead-letter queue", "--dlq URL")
	case "operator":
		return need(t.OperatorQueue, "operator queue", "--operator-queue URL")
	}
	if strings.HasPrefix(name, "https://") || strings.HasPrefix(name, "http://") {
		return name, nil
	}
	return "", fmt.Errorf("%w: queue %q: say main, dlq, operator, or a queue URL", ErrUsage, name)
}
