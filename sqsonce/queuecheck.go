package sqsonce

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/retrybudget"
)

// checkedAttributes are the queue attributes queueWarnings reads.
var checkedAttributes = []sqstypes.QueueAttributeName{
	sqstypes.QueueAttributeNameVisibilityTimeout,
	sqstypes.QueueAttributeNameRedrivePolicy,
	sqstypes.QueueAttributeNameMessageRetentionPeriod,
}

// queueWarnings says what is unsafe in the consumed queue's attributes for a
// function whose timeout is timeout. A queue the template creates passes;
// one a user brings may not, and its failures would be silent: a batch
// redelivered while still running, messages retried until they expire.
func queueWarnings(attrs map[string]string, timeout time.Duration) []string {
	var warnings []string
	visibility, vok := seconds(attrs[string(sqstypes.QueueAttributeNameVisibilityTimeout)])
	if vok && timeout > 0 && visibility < 6*timeout {
		warnings = append(warnings, fmt.Sprintf(
			"VisibilityTimeout is %v, under 6 × the function's timeout (%v): SQS may deliver a batch again while an invocation still runs it; Lambda's guidance is at least 6 × the timeout plus the batching window",
			visibility, timeout.Round(time.Second)))
	}
	policy := attrs[string(sqstypes.QueueAttributeNameRedrivePolicy)]
	if policy == "" || json.Unmarshal([]byte(policy), &struct{}{}) != nil {
		warnings = append(warnings, "no redrive policy: a message that keeps failing is retried until its retention ends and is then deleted by SQS, lost; set a redrive policy to a dead-letter queue")
		return warnings
	}
	receives, ok := maxReceiveCount(attrs)
	retention, rok := seconds(attrs[string(sqstypes.QueueAttributeNameMessageRetentionPeriod)])
	if ok && rok && vok && retention < time.Duration(receives)*visibility {
		warnings = append(warnings, fmt.Sprintf(
			"MessageRetentionPeriod is %v, under maxReceiveCount (%d) × VisibilityTimeout (%v): a failing message can expire before it reaches the dead-letter queue",
			retention, receives, visibility))
	}
	return warnings
}

// maxReceiveCount is the redrive policy's maxReceiveCount: the receives
// after which SQS moves a message to the dead-letter queue.
func maxReceiveCount(attrs map[string]string) (int64, bool) {
	var redrive struct {
		MaxReceiveCount json.Number `json:"maxReceiveCount"`
	}
	if json.Unmarshal([]byte(attrs[string(sqstypes.QueueAttributeNameRedrivePolicy)]), &redrive) != nil {
		return 0, false
	}
	n, err := redrive.MaxReceiveCount.Int64()
	return n, err == nil && n > 0
}

func seconds(s string) (time.Duration, bool) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

// checkQueue reads the consumed queue's attributes once per execution
// environment, on its first event (only then is the function's timeout
// known, from the deadline), and logs one warning naming what is unsafe. It
// keeps the redrive policy's maxReceiveCount for delayRetries. A queue it
// cannot read (no sqs:GetQueueAttributes) is logged at debug level and not
// checked. It costs one call per cold start, bounded to a second.
func (p *Processor) checkQueue(ctx context.Context) {
	if p.cfg.QueueURL == "" {
		return
	}
	p.queueChecked.Do(func() {
		var timeout time.Duration
		if deadline, ok := ctx.Deadline(); ok {
			timeout = deadline.Sub(p.now()).Round(time.Second)
		}
		callCtx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		out, err := p.sqs.GetQueueAttributes(callCtx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(p.cfg.QueueURL), AttributeNames: checkedAttributes}, retrybudget.SQS(callCtx))
		if err != nil {
			p.log.DebugContext(ctx, "queue attributes not checked", "queueUrl", p.cfg.QueueURL, "error", err)
			return
		}
		if n, ok := maxReceiveCount(out.Attributes); ok {
			p.maxReceives.Store(n)
		}
		if w := queueWarnings(out.Attributes, timeout); len(w) > 0 {
			p.log.WarnContext(ctx, "the consumed queue's settings are unsafe for this function; see docs/migration.md",
				"queueUrl", p.cfg.QueueURL, "problems", w)
		}
	})
}
