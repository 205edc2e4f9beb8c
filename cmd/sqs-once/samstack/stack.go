package samstack

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
)

// Stack is a deployed stack as read back from the endpoint.
type Stack struct {
	Name string
	ID   string
	// Status is the stack status, CREATE_COMPLETE after a successful Deploy.
	Status string
	// Outputs by output key.
	Outputs map[string]string
	// Resources by logical id, as the endpoint lists them.
	Resources map[string]StackResource
	// Functions by logical id: each AWS::Lambda::Function of the stack with
	// its configuration and event source mappings as Lambda reports them.
	Functions map[string]Function

	// Set by Deploy only.

	// Template is the translated template as CloudFormation would receive it,
	// before any adaptation for the endpoint.
	Template Template
	// Parameters holds every parameter's value, defaults included.
	Parameters map[string]string
	// Adaptations lists each place where the endpoint's stack differs from
	// what CloudFormation would build, and what Deploy did about it.
	Adaptations []Adaptation
}

// StackResource is a resource of a deployed stack.
type StackResource struct {
	LogicalID  string
	Type       string
	PhysicalID string
	Status     string
}

// Function is a deployed Lambda function.
type Function struct {
	LogicalID     string
	Name          string
	ARN           string
	Runtime       string
	Handler       string
	Architectures []string
	Timeout       time.Duration
	MemorySize    int
	// Env is the function's environment exactly as Lambda holds it; a value
	// may be empty (CloudFormation cannot remove a variable, only blank it).
	Env map[string]string
	// Logging is the function's logging configuration; empty where the
	// endpoint has none (moto_server).
	Logging Logging
	// EventSources are the function's event source mappings.
	EventSources []EventSource
}

// Logging is a function's LoggingConfig as Lambda reports it.
type Logging struct {
	Format           string // Text or JSON
	ApplicationLevel string
	SystemLevel      string
	Group            string
}

// EventSource is an event source mapping of a function.
type EventSource struct {
	UUID                  string
	SourceARN             string
	State                 string
	BatchSize             int
	BatchingWindow        time.Duration
	FunctionResponseTypes []string
	// MaximumConcurrency is ScalingConfig.MaximumConcurrency, 0 when unset.
	MaximumConcurrency int
}

// EventSource returns the function's mapping for the given source ARN.
func (f Function) EventSource(sourceARN string) (EventSource, bool) {
	for _, es := range f.EventSources {
		if es.SourceARN == sourceARN {
			return es, true
		}
	}
	return EventSource{}, false
}

// Output returns the output's value, or an error naming the outputs there are.
func (s *Stack) Output(key string) (string, error) {
	if v, ok := s.Outputs[key]; ok {
		return v, nil
	}
	keys := make([]string, 0, len(s.Outputs))
	for k := range s.Outputs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return "", fmt.Errorf("stack %s has no output %s (it has %v)", s.Name, key, keys)
}

// Describe reads a deployed stack: its outputs, resources, and every Lambda
// function's configuration and event source mappings. It works on AWS as on
// moto_server.
func Describe(ctx context.Context, awsCfg aws.Config, stackName string) (*Stack, error) {
	cf := cloudformation.NewFromConfig(awsCfg)
	out, err := cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(stackName)})
	if err != nil {
		return nil, fmt.Errorf("describe stack %s: %w", stackName, err)
	}
	if len(out.Stacks) != 1 {
		return nil, fmt.Errorf("describe stack %s: %d stacks found", stackName, len(out.Stacks))
	}
	s := out.Stacks[0]
	st := &Stack{
		Name:      stackName,
		ID:        aws.ToString(s.StackId),
		Status:    string(s.StackStatus),
		Outputs:   map[string]string{},
		Resources: map[string]StackResource{},
		Functions: map[string]Function{},
	}
	for _, o := range s.Outputs {
		st.Outputs[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}

	pages := cloudformation.NewListStackResourcesPaginator(cf, &cloudformation.ListStackResourcesInput{StackName: aws.String(stackName)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list resources of stack %s: %w", stackName, err)
		}
		for _, r := range page.StackResourceSummaries {
			id := aws.ToString(r.LogicalResourceId)
			if id == "" {
				// moto_server lists a nameless row for each resource type
				// it does not support; Deploy reports those separately.
				continue
			}
			st.Resources[id] = StackResource{
				LogicalID:  id,
				Type:       aws.ToString(r.ResourceType),
				PhysicalID: aws.ToString(r.PhysicalResourceId),
				Status:     string(r.ResourceStatus),
			}
		}
	}

	lc := lambda.NewFromConfig(awsCfg)
	local := aws.ToString(awsCfg.BaseEndpoint) != ""
	for id, r := range st.Resources {
		if r.Type != "AWS::Lambda::Function" {
			continue
		}
		fn, err := describeFunction(ctx, lc, id, r.PhysicalID)
		if err != nil {
			return nil, err
		}
		if fn.EventSources, err = eventSources(ctx, lc, fn, local); err != nil {
			return nil, fmt.Errorf("%s: %w", id, err)
		}
		st.Functions[id] = fn
	}
	return st, nil
}

func describeFunction(ctx context.Context, lc *lambda.Client, logicalID, name string) (Function, error) {
	c, err := lc.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(name)})
	if err != nil {
		return Function{}, fmt.Errorf("function %s (%s): %w", logicalID, name, err)
	}
	fn := Function{
		LogicalID:  logicalID,
		Name:       aws.ToString(c.FunctionName),
		ARN:        aws.ToString(c.FunctionArn),
		Runtime:    string(c.Runtime),
		Handler:    aws.ToString(c.Handler),
		Timeout:    time.Duration(aws.ToInt32(c.Timeout)) * time.Second,
		MemorySize: int(aws.ToInt32(c.MemorySize)),
		Env:        map[string]string{},
	}
	for _, a := range c.Architectures {
		fn.Architectures = append(fn.Architectures, string(a))
	}
	if c.Environment != nil {
		for k, v := range c.Environment.Variables {
			fn.Env[k] = v
		}
	}
	if l := c.LoggingConfig; l != nil {
		fn.Logging = Logging{
			Format:           string(l.LogFormat),
			ApplicationLevel: string(l.ApplicationLogLevel),
			SystemLevel:      string(l.SystemLogLevel),
			Group:            aws.ToString(l.LogGroup),
		}
	}
	return fn, nil
}

// eventSources lists the function's event source mappings, sorted by source.
//
// On AWS, ListEventSourceMappings filters by function and resolves a name or
// an ARN alike. moto_server compares the filter with the FunctionName exactly
// as the mapping was created with (a name from a template's Ref, an ARN from
// elsewhere), so on a local endpoint every mapping is listed and matched by
// the function's ARN instead: the local account holds only test stacks.
func eventSources(ctx context.Context, lc *lambda.Client, fn Function, local bool) ([]EventSource, error) {
	in := &lambda.ListEventSourceMappingsInput{FunctionName: aws.String(fn.ARN)}
	if local {
		in.FunctionName = nil
	}
	var out []EventSource
	pages := lambda.NewListEventSourceMappingsPaginator(lc, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("event source mappings of %s: %w", fn.Name, err)
		}
		for _, m := range page.EventSourceMappings {
			if local && aws.ToString(m.FunctionArn) != fn.ARN {
				continue
			}
			es := EventSource{
				UUID:           aws.ToString(m.UUID),
				SourceARN:      aws.ToString(m.EventSourceArn),
				State:          aws.ToString(m.State),
				BatchSize:      int(aws.ToInt32(m.BatchSize)),
				BatchingWindow: time.Duration(aws.ToInt32(m.MaximumBatchingWindowInSeconds)) * time.Second,
			}
			for _, t := range m.FunctionResponseTypes {
				es.FunctionResponseTypes = append(es.FunctionResponseTypes, string(t))
			}
			if m.ScalingConfig != nil {
				es.MaximumConcurrency = int(aws.ToInt32(m.ScalingConfig.MaximumConcurrency))
			}
			out = append(out, es)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SourceARN < out[j].SourceARN })
	return out, nil
}

// waitCreated polls the stack until it leaves CREATE_IN_PROGRESS, and
// explains a failure with the events of the resources that failed.
func waitCreated(ctx context.Context, cf *cloudformation.Client, stackName string) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		out, err := cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(stackName)})
		if err != nil {
			return fmt.Errorf("wait for stack %s: %w", stackName, err)
		}
		if len(out.Stacks) == 1 {
			s := out.Stacks[0]
			switch s.StackStatus {
			case cftypes.StackStatusCreateComplete:
				return nil
			case cftypes.StackStatusCreateInProgress:
			default:
				return fmt.Errorf("stack %s: %s: %s%s", stackName, s.StackStatus, aws.ToString(s.StackStatusReason), failedEvents(ctx, cf, stackName))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stack %s not CREATE_COMPLETE in time: %w", stackName, ctx.Err())
		case <-tick.C:
		}
	}
}

func failedEvents(ctx context.Context, cf *cloudformation.Client, stackName string) string {
	out, err := cf.DescribeStackEvents(ctx, &cloudformation.DescribeStackEventsInput{StackName: aws.String(stackName)})
	if err != nil {
		return ""
	}
	var s string
	for _, e := range out.StackEvents {
		if e.ResourceStatus == cftypes.ResourceStatusCreateFailed {
			s += fmt.Sprintf("\n  %s (%s): %s", aws.ToString(e.LogicalResourceId), aws.ToString(e.ResourceType), aws.ToString(e.ResourceStatusReason))
		}
	}
	return s
}
