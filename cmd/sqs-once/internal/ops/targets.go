package ops

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

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
	// HashKeys: the processor hashes keys (HASH_KEYS=on), so a key's
	// record id is "<KeyPrefix>#<sqsonce.HashKey(key)>".
	HashKeys bool `json:"hashKeys"`
	// HashKeysFrom says where HashKeys came from: "flag", "processor
	// environment", "stack parameter" or "default". A caller that sets
	// HashKeys from a flag sets it to "flag": a false HashKeys alone cannot
	// say whether the operator chose it, and Resolve reads the stack only
	// for what the operator left unsaid.
	HashKeysFrom string `json:"hashKeysFrom,omitempty"`
	// Region is the region of the calls, for messages ("" when unknown).
	Region string `json:"region,omitempty"`
	// Target is the processor's TARGET, read from the stack's processor
	// ("" without a stack, or when it was not read).
	Target string `json:"target,omitempty"`
	// Store is the store kind the records are in: StoreDynamoDB,
	// StoreRedis, StorePostgres or StoreMySQL, from --store or the processor's STORE
	// ("" is DynamoDB, the processor's default).
	Store string `json:"store,omitempty"`
	// StoreFrom says where Store came from: "flag" or "processor
	// environment".
	StoreFrom string `json:"storeFrom,omitempty"`
	// RedisURL and RedisCluster are the Redis store's server, from
	// --redis-url and --redis-cluster or the processor's REDIS_URL and
	// REDIS_CLUSTER; never printed (the URL may hold a password).
	RedisURL     string `json:"-"`
	RedisCluster bool   `json:"-"`
	// RedisURLFrom names where RedisURL came from, for its errors: the
	// flag, or the processor's variable.
	RedisURLFrom string `json:"-"`
	// DatabaseURL is the PostgreSQL or MySQL store's database (--database-url): a
	// library store, which no processor reads from its environment.
	DatabaseURL string `json:"-"`
	// DedupeWindow is the processor's DEDUPE_WINDOW, read from the stack's
	// processor (0: not read, or not a window it accepts), and
	// DedupeWindowFrom where it came from: status --pending tells a
	// completion's time by it.
	DedupeWindow     time.Duration `json:"-"`
	DedupeWindowFrom string        `json:"-"`
}

// The stack's outputs (template.yaml) and the processor's logical id.
const (
	outputMainQueue     = "MainQueueUrl"
	outputDeadLetter    = "DeadLetterQueueUrl"
	outputOperatorQueue = "OperatorQueueUrl"
	outputTable         = "IdempotencyTableName"
	processorLogicalID  = "ProcessorFunction"
	envKeyPrefix        = "KEY_PREFIX"
	envHashKeys         = "HASH_KEYS"
	envDedupeWindow     = "DEDUPE_WINDOW"
	paramHashKeys       = "HashKeys"
)

// Resolve fills what flags left empty from the stack's CloudFormation
// outputs, and the key prefix and key hashing from the processor's own
// KEY_PREFIX and HASH_KEYS: the template derives the prefix from the stack
// name unless KeyPrefix is set, and only the deployed function knows which
// (or what was changed on it by hand). Flags win over the stack.
func Resolve(ctx context.Context, cf StackAPI, fn FunctionAPI, flags Targets) (Targets, error) {
	t := flags
	if t.KeyPrefix != "" {
		t.KeyPrefixFrom = "flag"
	}
	if t.Stack == "" {
		if t.HashKeysFrom == "" {
			t.HashKeysFrom = "default"
		}
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
	if t.KeyPrefix != "" && t.HashKeysFrom != "" {
		// Both given: no need to read the processor. Its STORE is then
		// not read either: --store says a store other than DynamoDB.
		return t, nil
	}
	env, unread := processorEnv(ctx, cf, fn, t.Stack)
	t.Target = env[envTarget]
	t.DedupeWindow, t.DedupeWindowFrom = dedupeWindowOf(env)
	storeOf(&t, env)
	if t.KeyPrefix == "" {
		t.KeyPrefix, t.KeyPrefixFrom = keyPrefixOf(env, unread, t.Stack)
	}
	if t.HashKeysFrom == "" {
		t.HashKeys, t.HashKeysFrom = hashKeysOf(env, unread, stackParameters(st))
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

// stackParameters are the stack's parameters by key.
func stackParameters(st cftypes.Stack) map[string]string {
	params := map[string]string{}
	for _, p := range st.Parameters {
		params[aws.ToString(p.ParameterKey)] = aws.ToString(p.ParameterValue)
	}
	return params
}

// processorEnv reads the environment of the stack's processor function.
// Reading it needs lambda:GetFunctionConfiguration, which an operator's
// role may lack: then env is nil and unread says why, and the callers fall
// back on the stack's defaults rather than fail a read-only command.
func processorEnv(ctx context.Context, cf StackAPI, fn FunctionAPI, stack string) (env map[string]string, unread string) {
	ids, err := stackResources(ctx, cf, stack)
	if err != nil {
		return nil, "processor not readable"
	}
	physical, ok := ids[processorLogicalID]
	if !ok {
		return nil, "no processor in the stack"
	}
	conf, err := fn.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{
		FunctionName: aws.String(physical),
	})
	if err != nil || conf.Environment == nil {
		return nil, "processor not readable"
	}
	if conf.Environment.Variables == nil {
		return map[string]string{}, ""
	}
	return conf.Environment.Variables, ""
}

// storeOf fills, where flags did not, the store the processor uses from
// its STORE, REDIS_URL and REDIS_CLUSTER, read as internal/storeenv reads
// them (unset STORE is dynamodb).
func storeOf(t *Targets, env map[string]string) {
	if t.Store == "" {
		if v := strings.TrimSpace(env[envStore]); v != "" {
			t.Store, t.StoreFrom = v, "processor environment"
		}
	}
	if t.Store != StoreRedis {
		return
	}
	if t.RedisURL == "" {
		t.RedisURL = strings.TrimSpace(env[envRedisURL])
		t.RedisURLFrom = "the processor's " + envRedisURL
		t.RedisCluster = strings.TrimSpace(env[envRedisCluster]) == "true"
	}
}

// keyPrefixOf is the processor's KEY_PREFIX, or the template's default,
// "<stack>-processor", saying which.
func keyPrefixOf(env map[string]string, unread, stack string) (prefix, from string) {
	fallback := stack + "-processor"
	if env == nil {
		return fallback, "stack default (" + unread + ")"
	}
	if p := strings.TrimSpace(env[envKeyPrefix]); p != "" {
		return p, "processor environment"
	}
	return fallback, "stack default"
}

// hashKeysOf says whether the processor hashes keys, read as the processor
// reads HASH_KEYS (sqsonce.ConfigFromEnv: trimmed, blank is unset, unset is
// off). When the processor's environment could not be read, the stack's
// HashKeys parameter, which the template passes to HASH_KEYS, is the next
// best; a stack without one (a template from before HashKeys) does not hash.
func hashKeysOf(env map[string]string, unread string, params map[string]string) (hash bool, from string) {
	if env == nil {
		if v, ok := params[paramHashKeys]; ok {
			return strings.TrimSpace(v) == "on", "stack parameter (" + unread + ")"
		}
		return false, "default (" + unread + ")"
	}
	switch v := strings.TrimSpace(env[envHashKeys]); v {
	case "on":
		return true, "processor environment"
	case "off", "":
		return false, "processor environment"
	default:
		// The processor refuses to start with such a value, so it wrote
		// no record under it: its records, if any, predate the change.
		return false, fmt.Sprintf("processor environment, where %s=%q is not on or off and the processor refuses to start", envHashKeys, v)
	}
}

// The processor's DEDUPE_WINDOW: its default, and the most it accepts
// (sqsonce.ConsumerConfig, in seconds).
const (
	defaultDedupeWindow = 24 * time.Hour
	maxDedupeWindow     = 366 * 24 * time.Hour
)

// dedupeWindowOf is the processor's DEDUPE_WINDOW, read as the processor
// reads it (whole seconds, trimmed, blank is its default of 24 hours), and
// where it came from; 0 when the environment was not read or holds a
// value the processor refuses (it then wrote no completion under it).
func dedupeWindowOf(env map[string]string) (time.Duration, string) {
	if env == nil {
		return 0, ""
	}
	v := strings.TrimSpace(env[envDedupeWindow])
	if v == "" {
		return defaultDedupeWindow, "processor default, " + envDedupeWindow + " unset"
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 || time.Duration(n) > maxDedupeWindow/time.Second {
		return 0, ""
	}
	return time.Duration(n) * time.Second, "the processor's " + envDedupeWindow
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
