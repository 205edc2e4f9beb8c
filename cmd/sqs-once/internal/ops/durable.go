package ops

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// DurableFunction is the durable function a durable Target names, as
// preflight read it.
type DurableFunction struct {
	// Function and Qualifier are the Target's: the function without its
	// qualifier, and the version or alias.
	Function  string `json:"function"`
	Qualifier string `json:"qualifier"`
	// Version is the version the qualifier resolves to; "" when unread.
	Version string `json:"version,omitempty"`
	// Durable: the function has a DurableConfig (durable execution is on).
	Durable bool `json:"durable"`
	// ExecutionTimeoutSeconds is DurableConfig.ExecutionTimeout, 0 unset.
	ExecutionTimeoutSeconds int `json:"executionTimeoutSeconds,omitempty"`
	// TimeoutSeconds is the function's own timeout.
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
	// Synchronous: the processor's TARGET_INVOCATION_TYPE is
	// RequestResponse, and waits for each execution.
	Synchronous bool `json:"synchronous"`
	// Missing: Lambda says there is no such function, version or alias.
	Missing bool `json:"missing,omitempty"`
	// Unread is why it could not be read otherwise (denied, throttled).
	Unread string `json:"unread,omitempty"`
}

// The check of a durable target, and the processor's variable that makes
// it synchronous.
const (
	checkDurableName     = "durable function"
	envInvocationType    = "TARGET_INVOCATION_TYPE"
	maxSynchronousInvoke = 900 // Lambda waits 15 minutes at most for a synchronous invocation
)

// readDurable reads the function of a durable Target, at its qualifier;
// it does nothing for another Target. A failed read is recorded for the
// check, not returned: the other checks still run.
func (m *Migration) readDurable(ctx context.Context, api FunctionAPI) {
	spec, err := targets.ParseSpec(m.Target)
	if err != nil || spec.Kind != targets.Durable {
		return
	}
	q := spec.Qualifier()
	d := &DurableFunction{Function: strings.TrimSuffix(spec.Dest, ":"+q), Qualifier: q}
	if m.Processor != nil {
		d.Synchronous = m.Processor.env[envInvocationType] == string(lambdatypes.InvocationTypeRequestResponse)
	}
	m.Durable = d
	out, err := api.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(d.Function), Qualifier: aws.String(q)})
	var missing *lambdatypes.ResourceNotFoundException
	switch {
	case errors.As(err, &missing):
		d.Missing = true
	case err != nil:
		d.Unread = awsError("read function "+spec.Dest, err).Error()
	default:
		d.Version = aws.ToString(out.Version)
		d.TimeoutSeconds = int(aws.ToInt32(out.Timeout))
		if out.DurableConfig != nil {
			d.Durable = true
			d.ExecutionTimeoutSeconds = int(aws.ToInt32(out.DurableConfig.ExecutionTimeout))
		}
	}
}

// synchronousWait is how long a synchronous start may wait for its
// execution: Lambda's 15 minutes, or less when the execution times out
// sooner.
func (d *DurableFunction) synchronousWait() int {
	wait := maxSynchronousInvoke
	if d.ExecutionTimeoutSeconds > 0 {
		wait = min(wait, d.ExecutionTimeoutSeconds)
	}
	return wait
}

// checkDurable judges a durable target's function: the version or alias
// must exist (an unqualified Target is refused before: the template's
// pattern and the processor's start-up both refuse it); a function without
// durable execution would run each message's start as a plain invocation,
// the name ignored; a synchronous start must fit the processor's timeout.
func (m *Migration) checkDurable() Check {
	c := Check{Name: checkDurableName}
	d := m.Durable
	at := d.Function + ":" + d.Qualifier
	switch {
	case d.Missing:
		c.Status, c.Detail = CheckFail, fmt.Sprintf("no function %s%s (function, version or alias): every message would be refused to the operator queue", at, inRegion(m.Region))
		c.Change = []string{"publish a version of the durable function (or an alias to one), and deploy the stack with Target=durable:<function>:<version or alias>"}
	case d.Unread != "":
		c.Status, c.Detail = CheckFail, "cannot read it: "+d.Unread
		c.Change = []string{"run preflight with lambda:GetFunctionConfiguration on " + at}
	case !d.Durable:
		c.Status = CheckFail
		c.Detail = fmt.Sprintf("%s (version %s) has no DurableConfig: it is not a durable function, and Lambda would not deduplicate its starts by name", at, d.Version)
		c.Change = []string{"enable durable execution on the function (DurableConfig), publish a version, and name it in Target"}
	case d.Synchronous && m.ProcessorTimeoutSeconds < processorNeeds(d.synchronousWait()):
		c.Status = CheckWarn
		c.Detail = fmt.Sprintf("TARGET_INVOCATION_TYPE is RequestResponse: the processor waits for each execution of %s, up to %s (its ExecutionTimeout, at most Lambda's 15 minutes), but ProcessorTimeout is %s (%s needed): a longer execution's record is never completed by that wait, and its redelivery finds the execution already started",
			at, secs(d.synchronousWait()), secs(m.ProcessorTimeoutSeconds), secs(processorNeeds(d.synchronousWait())))
		c.Change = []string{fmt.Sprintf("deploy with TargetInvocationType=Event (the default: the record completes once Lambda accepted the start), or a ProcessorTimeout of at least %d s, or a shorter ExecutionTimeout", processorNeeds(d.synchronousWait()))}
	case d.Synchronous:
		c.Status, c.Detail = CheckOK, fmt.Sprintf("%s is durable (version %s); the processor waits for each execution, up to %s, within ProcessorTimeout (%s)", at, d.Version, secs(d.synchronousWait()), secs(m.ProcessorTimeoutSeconds))
	default:
		c.Status, c.Detail = CheckOK, fmt.Sprintf("%s is durable (version %s); each key's execution is started asynchronously, named after the key", at, d.Version)
	}
	return c
}

// durableExecution is the execution a durable Target starts for name,
// with the AWS CLI command that lists it (flags: awsFlags' for lambda).
func durableExecution(spec targets.Spec, name, flags string) *Execution {
	q := spec.Qualifier()
	function := strings.TrimSuffix(spec.Dest, ":"+q)
	return &Execution{Name: name, Lookup: "aws lambda list-durable-executions-by-function" + flags +
		" --function-name " + function + " --qualifier " + q + " --durable-execution-name " + name}
}
