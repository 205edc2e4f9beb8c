package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// The allowed values of the template's ProcessorTimeout and
// ProcessorBatchingWindow (template.yaml): what preflight may suggest and
// what --processor-timeout and --batching-window accept. The integration
// test TestMigrationValuesAreTheTemplates keeps them equal.
var (
	ProcessorTimeouts = []int{1, 2, 3, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600, 900}
	BatchingWindows   = []int{0, 1, 2, 5, 10, 20, 30, 60, 120, 300}
)

// What preflight and cutover read of a stack (template.yaml): outputs,
// logical ids (SAM names an event's mapping <function id><event name>),
// the cutover parameter and the functions' variables.
const (
	outputMainQueueArn        = "MainQueueArn"
	outputDeadLetterArn       = "DeadLetterQueueArn"
	replayerLogicalID         = "DlqReplayerFunction"
	processorMappingLogicalID = "ProcessorFunctionMainQueue"
	paramMappingEnabled       = "ProcessorMappingEnabled"
	envTarget                 = "TARGET"
	envMaxMessageAge          = "MAX_MESSAGE_AGE"
	envFailureBackoff         = "FAILURE_BACKOFF_BASE"
)

// SQS's limits on a queue's retention (MessageRetentionPeriod).
const (
	minRetention = 60
	maxRetention = 1_209_600
)

// Function is a Lambda function as preflight reads it.
type Function struct {
	Name           string `json:"name"`
	ARN            string `json:"arn"`
	TimeoutSeconds int    `json:"timeoutSeconds"`
	env            map[string]string
}

// Mapping is an event source mapping on the queue.
type Mapping struct {
	UUID        string `json:"uuid"`
	FunctionARN string `json:"functionArn"`
	State       string `json:"state"`
	// BatchingWindowSeconds is MaximumBatchingWindowInSeconds.
	BatchingWindowSeconds int `json:"batchingWindowSeconds"`
}

// Consumes says whether the mapping may be reading the queue: enabled, or
// on its way there, or in a state (Creating, Updating) that may end
// enabled.
func (m Mapping) Consumes() bool {
	switch m.State {
	case "Disabled", "Disabling", "Deleting":
		return false
	}
	return true
}

// QueueSettings are the queue's attributes the migration depends on.
type QueueSettings struct {
	URL               string `json:"url"`
	ARN               string `json:"arn"`
	VisibilitySeconds int    `json:"visibilityTimeoutSeconds"`
	RetentionSeconds  int    `json:"messageRetentionPeriodSeconds"`
	// DeadLetterARN and MaxReceiveCount are the redrive policy's; empty
	// and 0 without one.
	DeadLetterARN   string `json:"deadLetterTargetArn,omitempty"`
	MaxReceiveCount int    `json:"maxReceiveCount,omitempty"`
}

// Migration is what preflight and cutover read of a queue, the sqs-once
// stack put in front of it, and the consumer that reads it today.
type Migration struct {
	Region string        `json:"region,omitempty"`
	Stack  string        `json:"stack,omitempty"`
	Queue  QueueSettings `json:"queue"`
	// The processor's timeout and batching window: the stack's, or without
	// a stack the values the user plans to deploy with.
	ProcessorTimeoutSeconds int `json:"processorTimeoutSeconds"`
	BatchingWindowSeconds   int `json:"batchingWindowSeconds"`

	// Set with a stack only.
	Processor          *Function `json:"processor,omitempty"`
	Replayer           *Function `json:"replayer,omitempty"`
	StackDeadLetterARN string    `json:"stackDeadLetterQueueArn,omitempty"`
	StackMapping       *Mapping  `json:"stackMapping,omitempty"`
	// MappingParameter is the stack's ProcessorMappingEnabled, "" for a
	// stack deployed before the parameter existed.
	MappingParameter string `json:"processorMappingEnabled,omitempty"`
	// Target is the processor's TARGET.
	Target string `json:"target,omitempty"`

	// ConsumerName is the consumer as given (--consumer) or as the
	// stack's Target names it; Consumer is that function, read back.
	ConsumerName     string    `json:"consumerName,omitempty"`
	Consumer         *Function `json:"consumer,omitempty"`
	ConsumerMappings []Mapping `json:"consumerMappings,omitempty"`
	// OtherMappings are the queue's mappings of any other function.
	OtherMappings []Mapping `json:"otherMappings,omitempty"`
	// StateMachine is the state machine a states Target names.
	StateMachine *StateMachine `json:"stateMachine,omitempty"`
	// Durable is the durable function a durable Target names.
	Durable *DurableFunction `json:"durableFunction,omitempty"`
	// Endpoints are the endpoints it was read from in place of AWS's
	// (MigrationOptions.Endpoints): the fixes printed carry them.
	Endpoints Endpoints `json:"endpoints,omitempty"`
	// Store is the store's own check (Processor.Check's): nil when there
	// is no table to check (no stack, no --table).
	Store *StoreCheck `json:"store,omitempty"`
	// table is the stack's IdempotencyTableName output.
	table string
}

// MigrationOptions say which queue, stack and consumer to read.
type MigrationOptions struct {
	Region string
	// Stack is the sqs-once stack put in front of the queue; "" before it
	// is deployed.
	Stack string
	// QueueURL is the queue without a stack; with one it must be the
	// stack's (or empty).
	QueueURL string
	// Consumer is the function that consumes the queue today (name, ARN,
	// optionally qualified); "" takes the one the stack's Target names.
	Consumer string
	// ProcessorTimeoutSeconds and BatchingWindowSeconds are the values the
	// stack will be deployed with, used without a stack.
	ProcessorTimeoutSeconds, BatchingWindowSeconds int
	// Endpoints are the endpoints the clients call in place of AWS's: each
	// AWS CLI command a check prints carries its service's --endpoint-url.
	Endpoints Endpoints
}

// ReadMigration reads everything preflight checks and cutover changes:
// the queue's attributes, the stack's processor, mapping and dead-letter
// queue, the consumer, and every event source mapping on the queue. It
// changes nothing.
func ReadMigration(ctx context.Context, sq SQSAPI, cf StackAPI, fn MappingAPI, opt MigrationOptions) (*Migration, error) {
	m := &Migration{Region: opt.Region, Stack: opt.Stack, ConsumerName: opt.Consumer, Endpoints: opt.Endpoints,
		ProcessorTimeoutSeconds: opt.ProcessorTimeoutSeconds, BatchingWindowSeconds: opt.BatchingWindowSeconds}
	queueURL := opt.QueueURL
	if opt.Stack != "" {
		st, err := describeStack(ctx, cf, opt.Stack, opt.Region)
		if err != nil {
			return nil, err
		}
		outputs := stackOutputs(st)
		if queueURL != "" && queueURL != outputs[outputMainQueue] {
			return nil, fmt.Errorf("%w: --main-queue %s is not the queue stack %s consumes (%s): leave it out", ErrUsage, queueURL, opt.Stack, outputs[outputMainQueue])
		}
		queueURL = outputs[outputMainQueue]
		m.Queue.ARN = outputs[outputMainQueueArn]
		m.StackDeadLetterARN = outputs[outputDeadLetterArn]
		m.table = outputs[outputTable]
		for _, p := range st.Parameters {
			if aws.ToString(p.ParameterKey) == paramMappingEnabled {
				m.MappingParameter = aws.ToString(p.ParameterValue)
			}
		}
		ids, err := stackResources(ctx, cf, opt.Stack)
		if err != nil {
			return nil, err
		}
		name, ok := ids[processorLogicalID]
		if !ok {
			return nil, fmt.Errorf("stack %s%s has no %s (deployed with Components=replayer?): nothing consumes the queue through sqs-once: %w", opt.Stack, inRegion(opt.Region), processorLogicalID, ErrNotFound)
		}
		if m.Processor, err = readFunction(ctx, fn, name, "the processor of stack "+opt.Stack, opt.Region); err != nil {
			return nil, err
		}
		m.ProcessorTimeoutSeconds = m.Processor.TimeoutSeconds
		m.Target = m.Processor.env[envTarget]
		if name, ok := ids[replayerLogicalID]; ok {
			if m.Replayer, err = readFunction(ctx, fn, name, "the replayer of stack "+opt.Stack, opt.Region); err != nil {
				return nil, err
			}
		}
		if uuid, ok := ids[processorMappingLogicalID]; ok {
			es, err := fn.GetEventSourceMapping(ctx, &lambda.GetEventSourceMappingInput{UUID: aws.String(uuid)})
			if err != nil {
				return nil, awsError("read the event source mapping "+uuid+" of stack "+opt.Stack+inRegion(opt.Region), err)
			}
			mp := mapping(es.EventSourceArn, es.FunctionArn, es.UUID, es.State, es.MaximumBatchingWindowInSeconds)
			m.StackMapping = &mp
			m.BatchingWindowSeconds = mp.BatchingWindowSeconds
		}
		if m.ConsumerName == "" {
			if spec, err := targets.ParseSpec(m.Target); err == nil && spec.Kind == targets.Lambda {
				m.ConsumerName = spec.Dest
			}
		}
	}
	if queueURL == "" {
		return nil, fmt.Errorf("%w: no queue: give --stack, or --main-queue URL", ErrUsage)
	}
	if err := m.readQueue(ctx, sq, queueURL); err != nil {
		return nil, err
	}
	if m.ConsumerName != "" {
		var err error
		if m.Consumer, err = readFunction(ctx, fn, m.ConsumerName, "consumer function "+m.ConsumerName, opt.Region); err != nil {
			return nil, err
		}
	}
	return m, m.readMappings(ctx, fn)
}

func (m *Migration) readQueue(ctx context.Context, sq SQSAPI, queueURL string) error {
	m.Queue.URL = queueURL
	// All, not a list of names: moto_server rejects some names, and the
	// attributes are few.
	out, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(queueURL), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
	})
	if err != nil {
		return awsError("read the attributes of queue "+queueURL+inRegion(m.Region), err)
	}
	a := out.Attributes
	if arn := a[string(sqstypes.QueueAttributeNameQueueArn)]; arn != "" {
		m.Queue.ARN = arn
	}
	m.Queue.VisibilitySeconds, _ = strconv.Atoi(a[string(sqstypes.QueueAttributeNameVisibilityTimeout)])
	m.Queue.RetentionSeconds, _ = strconv.Atoi(a[string(sqstypes.QueueAttributeNameMessageRetentionPeriod)])
	m.Queue.DeadLetterARN, m.Queue.MaxReceiveCount = redrivePolicy(a[string(sqstypes.QueueAttributeNameRedrivePolicy)])
	return nil
}

// redrivePolicy reads a RedrivePolicy attribute. SQS writes maxReceiveCount
// as a number; a policy set through CloudFormation or by hand may hold it
// as a string.
func redrivePolicy(policy string) (deadLetterARN string, maxReceiveCount int) {
	var p struct {
		DeadLetterTargetArn string          `json:"deadLetterTargetArn"`
		MaxReceiveCount     json.RawMessage `json:"maxReceiveCount"`
	}
	if policy == "" || json.Unmarshal([]byte(policy), &p) != nil {
		return "", 0
	}
	n, err := strconv.Atoi(strings.Trim(string(p.MaxReceiveCount), `"`))
	if err != nil || n < 0 {
		n = 0
	}
	return p.DeadLetterTargetArn, n
}

func readFunction(ctx context.Context, fn FunctionAPI, name, what, region string) (*Function, error) {
	out, err := fn.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(name)})
	if err != nil {
		var missing *lambdatypes.ResourceNotFoundException
		if errors.As(err, &missing) {
			return nil, fmt.Errorf("%s%s: %w: %w", what, inRegion(region), ErrNotFound, err)
		}
		return nil, awsError("read "+what+inRegion(region), err)
	}
	f := &Function{Name: aws.ToString(out.FunctionName), ARN: aws.ToString(out.FunctionArn), TimeoutSeconds: int(aws.ToInt32(out.Timeout)), env: map[string]string{}}
	if out.Environment != nil {
		f.env = out.Environment.Variables
	}
	return f, nil
}

// unqualified is a function ARN without its version or alias: a mapping
// of any version or alias of a function is that function's.
func unqualified(functionARN string) string {
	if p := strings.Split(functionARN, ":"); len(p) > 7 {
		return strings.Join(p[:7], ":")
	}
	return functionARN
}

func mapping(source, function, uuid, state *string, window *int32) Mapping {
	return Mapping{UUID: aws.ToString(uuid), FunctionARN: aws.ToString(function), State: aws.ToString(state), BatchingWindowSeconds: int(aws.ToInt32(window))}
}

// readMappings lists every event source mapping on the queue, the
// stack's, the consumer's and any other function's.
func (m *Migration) readMappings(ctx context.Context, fn MappingAPI) error {
	p := lambda.NewListEventSourceMappingsPaginator(fn, &lambda.ListEventSourceMappingsInput{EventSourceArn: aws.String(m.Queue.ARN)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return awsError("list the event source mappings on queue "+m.Queue.ARN, err)
		}
		for _, es := range page.EventSourceMappings {
			mp := mapping(es.EventSourceArn, es.FunctionArn, es.UUID, es.State, es.MaximumBatchingWindowInSeconds)
			switch {
			case aws.ToString(es.EventSourceArn) != m.Queue.ARN:
				// An endpoint that ignores the filter (none known); not
				// this queue's.
			case m.StackMapping != nil && mp.UUID == m.StackMapping.UUID:
				m.StackMapping = &mp
			case m.Consumer != nil && unqualified(mp.FunctionARN) == unqualified(m.Consumer.ARN):
				m.ConsumerMappings = append(m.ConsumerMappings, mp)
			default:
				m.OtherMappings = append(m.OtherMappings, mp)
			}
		}
	}
	return nil
}

// CheckStatus is a check's verdict: only CheckFail makes preflight fail.
type CheckStatus string

const (
	CheckOK   CheckStatus = "ok"
	CheckFail CheckStatus = "FAIL"
	CheckWarn CheckStatus = "warn"
	CheckSkip CheckStatus = "skip"
)

// Check is one preflight check: what was found, and what to change.
type Check struct {
	Name   string      `json:"name"`
	Status CheckStatus `json:"status"`
	Detail string      `json:"detail"`
	// Change lists what to do, one command or step a line.
	Change []string `json:"change,omitempty"`
}

// The checks' names.
const (
	checkVisibility = "visibility timeout"
	checkRedrive    = "redrive policy"
	checkRetention  = "retention"
	checkTarget     = "target"
	checkConsumer   = "consumer timeout"
	checkMappings   = "mappings"
	checkParameter  = "stack parameter"
	checkReplayAge  = "replay age limit"
)

// Checks judges what ReadMigration read: each check says what it found and,
// when it fails or warns, what to change. It makes no call.
func (m *Migration) Checks() []Check {
	checks := []Check{m.checkVisibility(), m.checkRedrive(), m.checkRetention()}
	if m.Store != nil {
		// First of the stack's: with no table, every message fails
		// whatever the rest says.
		checks = append(checks, m.checkTheStore())
	}
	if m.Stack != "" {
		checks = append(checks, m.checkTarget())
		if m.StateMachine != nil {
			checks = append(checks, m.checkStateMachine())
		}
		if m.Durable != nil {
			checks = append(checks, m.checkDurable())
		}
	}
	checks = append(checks, m.checkConsumer())
	// The mappings' check says what to do next, which depends on the
	// others: judged last, shown in its place.
	mappings := len(checks)
	checks = append(checks, Check{})
	if m.Stack != "" {
		checks = append(checks, m.checkParameter())
		if m.Replayer != nil {
			checks = append(checks, m.checkReplayAge())
		}
	}
	var failing []string
	for _, c := range Failed(checks) {
		failing = append(failing, c.Name)
	}
	checks[mappings] = m.checkMappings(failing)
	return checks
}

// Failed is the checks that failed.
func Failed(checks []Check) []Check {
	var out []Check
	for _, c := range checks {
		if c.Status == CheckFail {
			out = append(out, c)
		}
	}
	return out
}

// Settings says where the processor's timeout and batching window the
// checks use come from: the stack, or the values planned with
// --processor-timeout and --batching-window.
func (m *Migration) Settings() string {
	from := "stack " + m.Stack + "'s"
	if m.Stack == "" {
		from = "the planned (--processor-timeout, --batching-window)"
	}
	return fmt.Sprintf("%s ProcessorTimeout %s and ProcessorBatchingWindow %s", from, secs(m.ProcessorTimeoutSeconds), secs(m.BatchingWindowSeconds))
}

// consumerNeeds is the ProcessorTimeout the consumer needs when the
// current one is too short for it (the smallest allowed value that
// covers it), else 0.
func (m *Migration) consumerNeeds() int {
	if m.Consumer == nil || m.ProcessorTimeoutSeconds >= processorNeeds(m.Consumer.TimeoutSeconds) {
		return 0
	}
	need := processorNeeds(m.Consumer.TimeoutSeconds)
	if i := slices.IndexFunc(ProcessorTimeouts, func(v int) bool { return v >= need }); i >= 0 {
		return ProcessorTimeouts[i]
	}
	return 0
}

// setQueue is the AWS CLI command that sets one of the queue's attributes.
func (m *Migration) setQueue(attributes string) string {
	return "aws sqs set-queue-attributes" + m.awsFlags("sqs") + " --queue-url " + m.Queue.URL + " --attributes " + attributes
}

// neededVisibility is Lambda's guidance for an SQS event source: six
// times the function's timeout plus the batching window, as the template
// sets a queue it creates.
func (m *Migration) neededVisibility() int {
	return 6*m.ProcessorTimeoutSeconds + m.BatchingWindowSeconds
}

func (m *Migration) checkVisibility() Check {
	c := Check{Name: checkVisibility}
	need := m.neededVisibility()
	how := fmt.Sprintf("6 x ProcessorTimeout (%s) + ProcessorBatchingWindow (%s) = %s", secs(m.ProcessorTimeoutSeconds), secs(m.BatchingWindowSeconds), secs(need))
	// The consumer may need a longer ProcessorTimeout (see its check):
	// then the visibility timeout to set is the one that one needs.
	later := ""
	if p := m.consumerNeeds(); p > 0 {
		need = 6*p + m.BatchingWindowSeconds
		later = fmt.Sprintf("; %s once ProcessorTimeout is %d, as the consumer needs", secs(need), p)
	}
	switch {
	case m.Queue.VisibilitySeconds >= need:
		c.Status, c.Detail = CheckOK, fmt.Sprintf("%s, at least %s", secs(m.Queue.VisibilitySeconds), how)
		return c
	case m.Queue.VisibilitySeconds >= m.neededVisibility():
		c.Detail = fmt.Sprintf("%s, at least %s, but not %s", secs(m.Queue.VisibilitySeconds), how, strings.TrimPrefix(later, "; "))
	default:
		c.Detail = fmt.Sprintf("%s, under %s%s: SQS would deliver a message again while an invocation still runs it", secs(m.Queue.VisibilitySeconds), how, later)
	}
	c.Status = CheckFail
	c.Change = []string{m.setQueue(fmt.Sprintf("VisibilityTimeout=%d", need))}
	return c
}

func (m *Migration) checkRedrive() Check {
	c := Check{Name: checkRedrive}
	receives := m.Queue.MaxReceiveCount
	if receives == 0 {
		receives = 5 // the template's MaxReceiveCount default
	}
	dlq := m.StackDeadLetterARN
	if dlq == "" {
		dlq = m.Queue.DeadLetterARN
	}
	fix := func() []string {
		if dlq == "" {
			return []string{"deploy the stack first; then point the queue's redrive policy at its DeadLetterQueueArn output (sqs-once preflight --stack NAME prints the command)"}
		}
		return []string{m.setQueue(fmt.Sprintf(`'{"RedrivePolicy":"{\"deadLetterTargetArn\":\"%s\",\"maxReceiveCount\":\"%d\"}"}'`, dlq, receives))}
	}
	switch {
	case m.Queue.DeadLetterARN == "" || m.Queue.MaxReceiveCount < 1:
		c.Status, c.Change = CheckFail, fix()
		c.Detail = "none: a message that keeps failing is retried until its retention ends and is then deleted by SQS, never dead-lettered or replayed"
	case m.StackDeadLetterARN != "" && m.Queue.DeadLetterARN != m.StackDeadLetterARN:
		c.Status, c.Change = CheckFail, fix()
		c.Detail = fmt.Sprintf("dead-letters to %s, not to the stack's dead-letter queue %s: the stack's replayer never sees what fails", QueueName(m.Queue.DeadLetterARN), QueueName(m.StackDeadLetterARN))
	case m.StackDeadLetterARN != "":
		c.Status = CheckOK
		c.Detail = fmt.Sprintf("dead-letters to the stack's dead-letter queue %s after %s", QueueName(m.StackDeadLetterARN), count(m.Queue.MaxReceiveCount, "receive", "receives"))
	default:
		c.Status = CheckOK
		c.Detail = fmt.Sprintf("dead-letters to %s after %s; once the stack is deployed, it must point at the stack's dead-letter queue (its DeadLetterQueueArn output), or be the queue you give as ExistingDeadLetterQueueArn",
			QueueName(m.Queue.DeadLetterARN), count(m.Queue.MaxReceiveCount, "receive", "receives"))
	}
	return c
}

func (m *Migration) checkRetention() Check {
	c := Check{Name: checkRetention}
	receives := m.Queue.MaxReceiveCount
	if receives < 1 {
		c.Status, c.Detail = CheckSkip, fmt.Sprintf("%s; no maxReceiveCount to compare it with (see the redrive policy)", secs(m.Queue.RetentionSeconds))
		return c
	}
	need := receives * m.Queue.VisibilitySeconds
	backoff := ""
	if m.Processor != nil && m.Processor.env[envFailureBackoff] != "" {
		backoff = fmt.Sprintf("; FailureBackoffBase (%s s) delays each retry further, so keep it well above", m.Processor.env[envFailureBackoff])
	}
	if m.Queue.RetentionSeconds > need {
		c.Status = CheckOK
		c.Detail = fmt.Sprintf("%s, above maxReceiveCount %d x visibility timeout %s = %s%s", secs(m.Queue.RetentionSeconds), receives, secs(m.Queue.VisibilitySeconds), secs(need), backoff)
		return c
	}
	c.Status = CheckFail
	c.Detail = fmt.Sprintf("%s, not above maxReceiveCount %d x visibility timeout %s = %s: a failing message can expire before it is dead-lettered, and is lost%s",
		secs(m.Queue.RetentionSeconds), receives, secs(m.Queue.VisibilitySeconds), secs(need), backoff)
	if want := need + m.Queue.VisibilitySeconds; want <= maxRetention {
		c.Change = []string{m.setQueue(fmt.Sprintf("MessageRetentionPeriod=%d", max(want, minRetention)))}
	} else {
		c.Change = []string{fmt.Sprintf("lower maxReceiveCount in the redrive policy to at most %d: SQS keeps a message %s at most", (maxRetention-1)/max(m.Queue.VisibilitySeconds, 1), secs(maxRetention))}
	}
	return c
}

func (m *Migration) checkTarget() Check {
	c := Check{Name: checkTarget}
	spec, err := targets.ParseSpec(m.Target)
	switch {
	case m.Target == "":
		c.Status, c.Detail = CheckFail, "the stack's processor runs its built-in handler (Target is empty), so your consumer would receive nothing"
		c.Change = []string{"deploy the stack with Target=lambda:<your consumer function>"}
	case spec.Kind == targets.States && m.Consumer == nil:
		// No Lambda consumer to put the stack in front of: the stack's own
		// mapping consumes the queue, and the state machine check follows.
		c.Status, c.Detail = CheckOK, "the stack's processor starts one execution per key of the state machine "+spec.Dest
	case err != nil && strings.HasPrefix(m.Target, string(targets.Durable)+":"):
		// An unqualified durable function, set by hand past the template:
		// the processor refuses to start with it; the error says the fix.
		c.Status, c.Detail = CheckFail, fmt.Sprintf("the processor's TARGET %s is refused at start-up: %v", m.Target, err)
		c.Change = []string{"deploy the stack with Target=durable:<function>:<version or alias>"}
	case spec.Kind == targets.Durable && m.Consumer == nil:
		// As for a state machine: the durable function check follows.
		c.Status, c.Detail = CheckOK, "the stack's processor starts one durable execution per key of "+spec.Dest
	case err != nil || spec.Kind != targets.Lambda:
		c.Status, c.Detail = CheckFail, fmt.Sprintf("the stack's processor delivers to %s, not to a Lambda function: cutover moves a Lambda consumer's mapping", m.Target)
		c.Change = []string{"deploy the stack with Target=lambda:<your consumer function>"}
	case m.Consumer != nil && spec.FunctionName() != m.Consumer.Name:
		c.Status, c.Detail = CheckFail, fmt.Sprintf("the stack's processor delivers to %s, not to %s", m.Target, m.Consumer.Name)
		c.Change = []string{"deploy the stack with Target=lambda:" + m.Consumer.Name + ", or give the consumer that Target names as --consumer"}
	default:
		c.Status, c.Detail = CheckOK, "the stack's processor delivers each message it holds to "+m.Target
	}
	return c
}

// processorNeeds is the processor timeout a consumer of timeout seconds
// needs: the processor waits for each invocation and keeps a tenth of its
// remaining time, up to 2 seconds, to record the outcomes.
func processorNeeds(consumer int) int { return consumer + (consumer+9)/10 + 2 }

func (m *Migration) checkConsumer() Check {
	c := Check{Name: checkConsumer}
	if m.Consumer == nil {
		c.Status, c.Detail = CheckSkip, "no consumer named: give --consumer FUNCTION, or deploy the stack with Target=lambda:<function>"
		return c
	}
	tc, tp := m.Consumer.TimeoutSeconds, m.ProcessorTimeoutSeconds
	need := processorNeeds(tc)
	if tp >= need {
		c.Status = CheckOK
		c.Detail = fmt.Sprintf("%s times out after %s; ProcessorTimeout (%s) covers that plus a tenth plus 2 s (%s needed)", m.Consumer.Name, secs(tc), secs(tp), secs(need))
		return c
	}
	c.Status = CheckFail
	c.Detail = fmt.Sprintf("%s times out after %s, and ProcessorTimeout (%s) must outlast it by a tenth plus 2 s (%s): otherwise a slow invocation outlives the processor's, its outcome is never recorded, and the message runs again",
		m.Consumer.Name, secs(tc), secs(tp), secs(need))
	if p := m.consumerNeeds(); p > 0 {
		deploy := "deploy the stack"
		if m.Stack == "" {
			deploy = "plan (--processor-timeout) and deploy"
		}
		c.Change = append(c.Change, fmt.Sprintf("%s with ProcessorTimeout=%d, and set the queue's VisibilityTimeout to at least 6 x %d + %d = %d s", deploy, p, p, m.BatchingWindowSeconds, 6*p+m.BatchingWindowSeconds))
	}
	if most := maxConsumerTimeout(tp); most > 0 {
		c.Change = append(c.Change, fmt.Sprintf("or lower %s's timeout to at most %s", m.Consumer.Name, secs(most)))
	}
	return c
}

// maxConsumerTimeout is the longest consumer timeout a processor timeout
// covers, 0 for none.
func maxConsumerTimeout(processor int) int {
	for tc := processor; tc > 0; tc-- {
		if processorNeeds(tc) <= processor {
			return tc
		}
	}
	return 0
}

// mappingWords is a mapping in plain words: "a1b2... (Enabled)".
func mappingWords(mp Mapping) string { return mp.UUID + " (" + mp.State + ")" }

func functionName(arn string) string {
	if p := strings.Split(arn, ":"); len(p) >= 7 {
		return strings.Join(p[6:], ":")
	}
	return arn
}

// checkMappings judges the queue's mappings. failing are the other checks
// that fail: cutover refuses while any does, so the next step is their
// fix, not the cutover.
func (m *Migration) checkMappings(failing []string) Check {
	c := Check{Name: checkMappings}
	queue := QueueName(m.Queue.URL)
	var others []string
	for _, mp := range m.OtherMappings {
		if mp.Consumes() {
			others = append(others, functionName(mp.FunctionARN))
			c.Change = append(c.Change, fmt.Sprintf("aws lambda update-event-source-mapping%s --uuid %s --no-enabled   (%s)", m.awsFlags("lambda"), mp.UUID, functionName(mp.FunctionARN)))
		}
	}
	consumerOn := slices.ContainsFunc(m.ConsumerMappings, Mapping.Consumes)
	var consumer string
	if m.Consumer != nil {
		var ms []string
		for _, mp := range m.ConsumerMappings {
			ms = append(ms, mappingWords(mp))
		}
		consumer = m.Consumer.Name + "'s mapping " + strings.Join(ms, ", ")
		if len(ms) == 0 {
			consumer = m.Consumer.Name + " has no mapping on " + queue
		}
	}
	cutover := "sqs-once cutover --stack " + m.Stack
	// blocked names what cutover refuses for: "visibility timeout fails".
	blocked := strings.Join(failing, ", ") + " " + plural(len(failing), "fails", "fail")
	switch {
	case len(others) > 0:
		c.Status = CheckFail
		who := "the consumer"
		if m.Consumer != nil {
			who = m.Consumer.Name
		}
		c.Detail = fmt.Sprintf("%s also consume%s %s: what %s receive%s skips dedupe and never reaches %s; if %s the consumer, give it as --consumer",
			strings.Join(others, ", "), plural(len(others), "s", ""), queue, pronoun(len(others)), plural(len(others), "s", ""), who, plural(len(others), "it is", "one of them is"))
	case m.Stack == "" && m.Consumer == nil:
		c.Status, c.Detail = CheckSkip, "no consumer named (--consumer), and no function consumes "+queue
	case m.Stack == "" && len(m.ConsumerMappings) == 0:
		c.Status, c.Detail = CheckWarn, consumer+": is it the function that consumes the queue?"
	case m.Stack == "":
		c.Status, c.Detail = CheckOK, consumer+": sqs-once cutover will disable it once the stack is deployed"
	case m.StackMapping == nil:
		c.Status, c.Detail = CheckFail, "stack "+m.Stack+" has no event source mapping on "+queue
		c.Change = []string{"deploy the stack with ExistingQueueArn=" + m.Queue.ARN}
	case m.StackMapping.Consumes() && consumerOn:
		c.Status = CheckFail
		c.Detail = fmt.Sprintf("both consume %s: the stack's mapping %s and %s; what the consumer's own mapping receives skips dedupe. After a cutover this is drift: the consumer's infrastructure code enabled its mapping again (docs/migration.md, Drift)",
			queue, mappingWords(*m.StackMapping), consumer)
		c.Change = []string{cutover + "   (disables the consumer's mapping again)", "then set the mapping disabled in the consumer's infrastructure code"}
		if len(failing) > 0 {
			c.Change = append([]string{"first make the changes above: cutover refuses while " + blocked}, c.Change...)
		}
	case m.StackMapping.Consumes():
		c.Status = CheckOK
		c.Detail = fmt.Sprintf("cut over: the stack's mapping %s consumes %s", mappingWords(*m.StackMapping), queue)
		if m.Consumer != nil {
			c.Detail += " and hands its messages to " + m.Consumer.Name + "; " + consumer
		}
	case consumerOn && len(failing) > 0:
		c.Status = CheckOK
		c.Detail = fmt.Sprintf("%s consumes %s, the stack's mapping %s does not; not ready to cut over while %s (sqs-once cutover refuses); next: make the changes above, then sqs-once preflight --stack %s again",
			consumer, queue, mappingWords(*m.StackMapping), blocked, m.Stack)
	case consumerOn:
		c.Status = CheckOK
		c.Detail = fmt.Sprintf("ready to cut over: %s consumes %s, the stack's mapping %s does not; next: %s", consumer, queue, mappingWords(*m.StackMapping), cutover)
	default:
		c.Status = CheckFail
		c.Detail = fmt.Sprintf("nothing consumes %s: the stack's mapping %s is off, and %s; messages wait until their retention ends", queue, mappingWords(*m.StackMapping), consumer)
		if m.Consumer == nil {
			c.Detail = fmt.Sprintf("nothing consumes %s: the stack's mapping %s is off; messages wait until their retention ends", queue, mappingWords(*m.StackMapping))
		}
		c.Change = []string{cutover, "or " + cutover + " --rollback"}
		if len(failing) > 0 {
			// cutover refuses until the others pass; a rollback runs
			// without the checks and has the consumer read the queue now.
			c.Change = []string{cutover + " --rollback   (the consumer reads the queue again now; a rollback runs without the checks)",
				"or make the changes above, then " + cutover + "   (it refuses while " + blocked + ")"}
		}
	}
	return c
}

func regionFlag(region string) string {
	if region == "" {
		return ""
	}
	return " --region " + region
}

// Endpoints are the endpoint URLs the CLI's clients call in place of AWS's
// own (AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_<SERVICE>, a profile's
// endpoint_url), by the AWS CLI's name of the service (sqs, lambda,
// dynamodb, stepfunctions); none on AWS.
type Endpoints map[string]string

// endpointsOf are the endpoints cfg's clients call, as each service's
// client resolves its own.
func endpointsOf(cfg aws.Config) Endpoints {
	e := Endpoints{}
	for service, u := range map[string]*string{
		"sqs":           sqs.NewFromConfig(cfg).Options().BaseEndpoint,
		"lambda":        lambda.NewFromConfig(cfg).Options().BaseEndpoint,
		"dynamodb":      dynamodb.NewFromConfig(cfg).Options().BaseEndpoint,
		"stepfunctions": sfn.NewFromConfig(cfg).Options().BaseEndpoint,
	} {
		if aws.ToString(u) != "" {
			e[service] = *u
		}
	}
	return e
}

// awsFlags is what a printed `aws SERVICE ...` command needs to reach what
// the CLI called: --region, and --endpoint-url when service's endpoint is
// not AWS's own. The AWS CLI v1 ignores AWS_ENDPOINT_URL: without the flag
// a fix printed against an emulator would go to AWS.
func awsFlags(service, region string, endpoints Endpoints) string {
	s := regionFlag(region)
	if u := endpoints[service]; u != "" {
		s += " --endpoint-url " + u
	}
	return s
}

// awsFlags is the flags of a printed command on service, in the
// migration's region and on the endpoints it was read from.
func (m *Migration) awsFlags(service string) string {
	return awsFlags(service, m.Region, m.Endpoints)
}

func (m *Migration) checkParameter() Check {
	c := Check{Name: checkParameter}
	on := m.StackMapping != nil && m.StackMapping.Consumes()
	switch {
	case m.MappingParameter == "":
		c.Status, c.Detail = CheckSkip, "the stack has no "+paramMappingEnabled+" parameter (deployed from an older template)"
	case m.StackMapping == nil:
		c.Status, c.Detail = CheckSkip, "the stack has no mapping on the queue"
	case (m.MappingParameter == "true") == on:
		c.Status, c.Detail = CheckOK, fmt.Sprintf("%s=%s, as the mapping is", paramMappingEnabled, m.MappingParameter)
	case on:
		c.Status = CheckWarn
		c.Detail = fmt.Sprintf("the stack was deployed with %s=false and its mapping is enabled (cut over): a later deploy that updates the mapping disables it again", paramMappingEnabled)
		c.Change = []string{"deploy the stack with " + paramMappingEnabled + "=true from now on"}
	default:
		c.Status = CheckWarn
		c.Detail = fmt.Sprintf("the stack was deployed with %s=true and its mapping is disabled (rolled back?): a later deploy that updates the mapping enables it again", paramMappingEnabled)
		c.Change = []string{"deploy the stack with " + paramMappingEnabled + "=false while the consumer reads the queue itself"}
	}
	return c
}

func (m *Migration) checkReplayAge() Check {
	c := Check{Name: checkReplayAge}
	age, _ := strconv.Atoi(m.Replayer.env[envMaxMessageAge])
	retention := m.Queue.RetentionSeconds
	switch {
	case age > 0 && age <= retention:
		c.Status, c.Detail = CheckOK, fmt.Sprintf("MaxMessageAge %s, within the queue's retention %s", secs(age), secs(retention))
		return c
	case age > 0:
		c.Detail = fmt.Sprintf("MaxMessageAge %s is longer than the queue's retention %s", secs(age), secs(retention))
	default:
		c.Detail = "MaxMessageAge is 0: the replayer replays a dead letter of any age, which the template limits to the retention only for a queue it creates"
	}
	c.Status = CheckWarn
	c.Change = []string{fmt.Sprintf("deploy the stack with MaxMessageAge=%d, the queue's retention", retention)}
	return c
}

// secs is a number of seconds, with the days, hours or minutes it makes
// when it is a whole number of them: "180 s (3 minutes)".
func secs(n int) string {
	s := strconv.Itoa(n) + " s"
	switch {
	case n >= 86400 && n%86400 == 0:
		s += " (" + count(n/86400, "day", "days") + ")"
	case n >= 3600 && n%3600 == 0:
		s += " (" + count(n/3600, "hour", "hours") + ")"
	case n >= 120 && n%60 == 0:
		s += " (" + count(n/60, "minute", "minutes") + ")"
	}
	return s
}

func pronoun(n int) string { return plural(n, "it", "they") }
