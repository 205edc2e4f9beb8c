package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/samstack"
	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/local/localesm"
	"github.com/sqs-once/sqs-once/internal/replay"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// Logical ids of the template's resources the runner wires together.
const (
	processorFunction = "ProcessorFunction"
	replayerFunction  = "DlqReplayerFunction"
)

// queueAPI is the part of the SQS client the runner uses: the event source
// mappings' calls, the producer's sends, and reading queue attributes.
type queueAPI interface {
	localesm.SQSAPI
	sqsmsg.BatchSender
}

var _ queueAPI = (*sqs.Client)(nil)

// stackInfo is a deployed sqs-once stack as both modes need it, read from
// the stack (outputs, functions and their event source mappings) and from
// the queues themselves, never from what the runner asked for.
type stackInfo struct {
	name                          string
	mainURL, dlqURL, opURL, table string
	processor, replayer           samstack.Function
	processorESM, replayerESM     samstack.EventSource
	processorCfg                  sqsonce.ConsumerConfig // as cmd/processor reads it; TARGET is deployedTarget
	replayCfg                     replay.Config
	maxReceiveCount               int
	visibility                    time.Duration // the main queue's
	adaptations                   []string
}

// loadStack reads what the runner needs from a deployed stack. Each function
// must have an event source mapping on its queue; its state is not checked,
// because samstack disables the mappings on moto_server on purpose.
func loadStack(ctx context.Context, api queueAPI, st *samstack.Stack) (*stackInfo, error) {
	s := &stackInfo{name: st.Name}
	for _, a := range st.Adaptations {
		s.adaptations = append(s.adaptations, a.String())
	}
	var err error
	for key, dst := range map[string]*string{"MainQueueUrl": &s.mainURL, "DeadLetterQueueUrl": &s.dlqURL, "OperatorQueueUrl": &s.opURL, "IdempotencyTableName": &s.table} {
		if *dst, err = st.Output(key); err != nil {
			return nil, fmt.Errorf("%w: is %s an sqs-once stack?", err, st.Name)
		}
	}
	main, err := queueAttributes(ctx, api, s.mainURL, sqstypes.QueueAttributeNameQueueArn,
		sqstypes.QueueAttributeNameRedrivePolicy, sqstypes.QueueAttributeNameVisibilityTimeout)
	if err != nil {
		return nil, err
	}
	if s.maxReceiveCount, err = parseMaxReceiveCount(main[string(sqstypes.QueueAttributeNameRedrivePolicy)]); err != nil {
		return nil, err
	}
	secs, err := strconv.Atoi(main[string(sqstypes.QueueAttributeNameVisibilityTimeout)])
	if err != nil {
		return nil, fmt.Errorf("visibility timeout of %s: %w", s.mainURL, err)
	}
	s.visibility = time.Duration(secs) * time.Second
	dlq, err := queueAttributes(ctx, api, s.dlqURL, sqstypes.QueueAttributeNameQueueArn)
	if err != nil {
		return nil, err
	}

	if s.processor, s.processorESM, err = functionOn(st, processorFunction, main[string(sqstypes.QueueAttributeNameQueueArn)]); err != nil {
		return nil, err
	}
	if s.replayer, s.replayerESM, err = functionOn(st, replayerFunction, dlq[string(sqstypes.QueueAttributeNameQueueArn)]); err != nil {
		return nil, err
	}
	cfg, cfgErr := sqsonce.ConfigFromEnv(lambdaEnv(s.processor))
	var targetErr error
	if t := s.deployedTarget(); t != "" {
		if _, err := targets.ParseSpec(t); err != nil {
			targetErr = &envconfig.VarError{Name: "TARGET", Msg: err.Error()}
		}
	}
	if err := errors.Join(cfgErr, targetErr); err != nil {
		return nil, fmt.Errorf("%s's environment: %w", processorFunction, err)
	}
	s.processorCfg = cfg
	if s.replayCfg, err = replay.LoadConfig(envconfig.Map(s.replayer.Env)); err != nil {
		return nil, fmt.Errorf("%s's environment: %w", replayerFunction, err)
	}
	return s, nil
}

// lambdaEnv is fn's environment as Lambda presents it to the function: its
// variables, and AWS_LAMBDA_FUNCTION_NAME, which Lambda sets (KEY_PREFIX's
// default, and the function a lambda TARGET must not name).
func lambdaEnv(fn samstack.Function) envconfig.Lookup {
	env := maps.Clone(fn.Env)
	if env == nil {
		env = map[string]string{}
	}
	env["AWS_LAMBDA_FUNCTION_NAME"] = fn.Name
	return envconfig.Map(env)
}

// deployedTarget is the processor's TARGET as deployed, "" for none: what
// cmd/processor hands the records to instead of its handler.
func (s *stackInfo) deployedTarget() string { return s.processor.Env["TARGET"] }

// functionOn finds a function of the stack and its event source mapping on
// the queue with the given ARN.
func functionOn(st *samstack.Stack, logicalID, queueARN string) (samstack.Function, samstack.EventSource, error) {
	fn, ok := st.Functions[logicalID]
	if !ok {
		return fn, samstack.EventSource{}, fmt.Errorf("stack %s has no %s: is it an sqs-once stack?", st.Name, logicalID)
	}
	es, ok := fn.EventSource(queueARN)
	if !ok {
		return fn, es, fmt.Errorf("%s of stack %s has no event source mapping on %s (it has %s)", logicalID, st.Name, queueARN, count(len(fn.EventSources), "mapping"))
	}
	return fn, es, nil
}

// esmConfig is the local event source mapping for a deployed function and its
// mapping: batch size, batching window, response types, timeout, and no more
// pollers than the mapping's maximum concurrency.
func esmConfig(fn samstack.Function, es samstack.EventSource, queueURL string, pollers int) localesm.Config {
	if es.MaximumConcurrency > 0 {
		pollers = min(pollers, es.MaximumConcurrency)
	}
	return localesm.Config{
		QueueURL:                queueURL,
		FunctionName:            fn.Name,
		BatchSize:               es.BatchSize,
		BatchingWindow:          es.BatchingWindow,
		ReportBatchItemFailures: slices.Contains(es.FunctionResponseTypes, "ReportBatchItemFailures"),
		Pollers:                 pollers,
		Timeout:                 fn.Timeout,
	}
}

// timings are the settings the report shows and checks against.
func (s *stackInfo) timings() Timings {
	b := s.replayCfg.Backoff
	return Timings{
		VisibilityTimeoutSeconds: int(s.visibility / time.Second),
		FunctionTimeoutSeconds:   s.processor.Timeout.Seconds(),
		LockTimeoutSeconds:       int(s.processorCfg.LockTimeout / time.Second),
		MaxReceiveCount:          s.maxReceiveCount,
		MaxAttempts:              s.replayCfg.MaxAttempts,
		BackoffBaseSeconds:       b.Base.Seconds(),
		BackoffRate:              b.Rate,
		MaxDelaySeconds:          int(b.Cap / time.Second),
		Jitter:                   string(b.Strategy),
	}
}

// lockDeadlineMargin is how long past the invocation's deadline the
// processor's lock lasts without a LOCK_TIMEOUT: sqsonce.Config.LockTimeout's
// "until the invocation's deadline plus 5 s" (deadlineMargin in sqsonce's
// lock.go, unexported there).
const lockDeadlineMargin = 5 * time.Second

// lockHold is the least time a processor lock is held after its invocation
// started: LOCK_TIMEOUT from the acquisition, or without one the
// invocation's deadline plus sqsonce's margin.
func (s *stackInfo) lockHold() time.Duration {
	if s.processorCfg.LockTimeout > 0 {
		return s.processorCfg.LockTimeout
	}
	return s.processor.Timeout + lockDeadlineMargin
}

func (s *stackInfo) ceiling(n int) float64 { return s.replayCfg.Backoff.Ceiling(n).Seconds() }

func queueAttributes(ctx context.Context, api localesm.SQSAPI, url string, names ...sqstypes.QueueAttributeName) (map[string]string, error) {
	out, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: names})
	if err != nil {
		return nil, fmt.Errorf("read the attributes of %s: %w", url, err)
	}
	return out.Attributes, nil
}

// parseMaxReceiveCount reads maxReceiveCount from a RedrivePolicy attribute,
// where SQS gives it as a number or a string.
func parseMaxReceiveCount(policy string) (int, error) {
	if policy == "" {
		return 0, fmt.Errorf("the main queue has no redrive policy: poison messages would never reach the DLQ")
	}
	var p struct {
		MaxReceiveCount json.RawMessage `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(policy), &p); err != nil {
		return 0, fmt.Errorf("redrive policy %q: %w", policy, err)
	}
	n, err := strconv.Atoi(strings.Trim(string(p.MaxReceiveCount), `"`))
	if err != nil || n < 1 {
		return 0, fmt.Errorf("redrive policy %q: maxReceiveCount is not a positive integer", policy)
	}
	return n, nil
}

// leftInQueues is what the main queue and the DLQ still hold, by role.
func (s *stackInfo) leftInQueues(ctx context.Context, api localesm.SQSAPI) (map[string]int, error) {
	left := map[string]int{}
	for role, url := range map[string]string{"main": s.mainURL, "dead-letter": s.dlqURL} {
		n, err := queueDepth(ctx, api, url)
		if err != nil {
			return nil, err
		}
		left[role] = n
	}
	return left, nil
}

// drained reports whether every queue of the list is empty.
func drained(ctx context.Context, api localesm.SQSAPI, urls ...string) bool {
	for _, u := range urls {
		if n, err := queueDepth(ctx, api, u); err != nil || n > 0 {
			return false
		}
	}
	return true
}

// queueDepth is every message a queue still holds: visible, in flight or
// delayed.
func queueDepth(ctx context.Context, api localesm.SQSAPI, url string) (int, error) {
	attrs, err := queueAttributes(ctx, api, url,
		sqstypes.QueueAttributeNameApproximateNumberOfMessages,
		sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, v := range attrs {
		n, _ := strconv.Atoi(v)
		total += n
	}
	return total, nil
}
