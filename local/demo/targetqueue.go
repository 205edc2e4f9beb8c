package demo

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// targetQueue is the second queue of -target sqs: the processor forwards
// each key's message there, and the report drains it.
type targetQueue struct {
	name string
	// url is the queue's address on the server the demo runs against, the
	// one it drains; spec is TARGET as the template's Target parameter
	// accepts it (see newTargetQueue).
	url  string
	spec targets.Spec
}

// newTargetQueue creates the destination queue of a local stack before the
// stack itself, so the template can be deployed with Target pointing at it.
//
// The Target parameter accepts only SQS's own queue URL form,
// https://sqs.<region>.amazonaws.com/<account>/<queue> (the template derives
// the queue's ARN, and so the processor's permission, from it), not the
// local server's http://127.0.0.1:<port>/<account>/<queue>. The spec is
// built from the queue's ARN in that form; the SDK sends every call to the
// configured endpoint whatever the QueueUrl says, and the server finds the
// queue by its account and name, so the processor's sends reach this queue.
func newTargetQueue(ctx context.Context, api *sqs.Client, stackName string) (*targetQueue, error) {
	name := stackName + "-forwarded"
	out, err := api.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		return nil, fmt.Errorf("create the target queue %s: %w", name, err)
	}
	url := aws.ToString(out.QueueUrl)
	attrs, err := queueAttributes(ctx, api, url, sqstypes.QueueAttributeNameQueueArn)
	if err != nil {
		return nil, err
	}
	arn := attrs[string(sqstypes.QueueAttributeNameQueueArn)]
	awsURL, err := sqsmsg.QueueURLFromARN(arn)
	if err != nil {
		return nil, err
	}
	spec, err := targets.ParseSpec(string(targets.SQS) + ":" + awsURL)
	if err != nil {
		return nil, err
	}
	return &targetQueue{name: name, url: url, spec: spec}, nil
}

// checkDeployed makes sure the deployed processor got the Target the demo
// asked for: a template that does not pass the Target parameter to the
// processor's TARGET would otherwise run a processor with no target at all.
func (q *targetQueue) checkDeployed(info *stackInfo, template string) error {
	if got := info.deployedTarget(); got != q.spec.String() {
		return fmt.Errorf("the processor deployed from %s has TARGET=%q, want %q: does the template pass its Target parameter to the processor's TARGET?", template, got, q.spec)
	}
	return nil
}

// targetAttributes are the message attributes every message of -target sqs
// carries besides "producer": a Binary value that is not valid UTF-8, a
// Number with a custom type, a String with a custom type and non-ASCII
// text. "Byte for byte" is checked on each. A Number stays in canonical
// form (no leading or trailing zero): SQS trims those, so "0012.50" would
// not come back as sent even without sqs-once in between.
func targetAttributes(s Send) map[string]sqstypes.MessageAttributeValue {
	sum := sha256.Sum256([]byte(s.ID))
	return map[string]sqstypes.MessageAttributeValue{
		"trace":  {DataType: aws.String("Binary"), BinaryValue: append([]byte{0xff, 0x00}, sum[:10]...)},
		"amount": {DataType: aws.String("Number.cents"), StringValue: aws.String(strconv.Itoa(100 + len(s.Key)*7))},
		"note":   {DataType: aws.String("String.utf8"), StringValue: aws.String("café ✓ " + s.ID)},
	}
}
