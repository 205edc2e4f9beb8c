package targets

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/sqs-once/sqs-once/internal/retrybudget"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/sqsonce"
)

// SNSAPI is the one SNS call an sns target makes.
type SNSAPI interface {
	PublishBatch(ctx context.Context, in *sns.PublishBatchInput, optFns ...func(*sns.Options)) (*sns.PublishBatchOutput, error)
}

var _ SNSAPI = (*sns.Client)(nil)

// SNS limits: a message, its attributes included, and a whole PublishBatch
// are at most 256 KiB; a batch holds at most 10 entries, a message 10
// attributes.
const (
	MaxSNSBytes        = 256 << 10
	maxSNSBatchEntries = 10
	maxSNSAttributes   = 10
)

// SNSTarget publishes each message to a topic with PublishBatch: body and
// message attributes as received, plus AttrKey and AttrFence where there is
// room. On a FIFO topic the group is the source's or the key, and the
// deduplication id is derived from the key.
type SNSTarget struct {
	API      SNSAPI
	TopicARN string
}

// Deliver publishes the messages, ten batches at once, a FIFO group's in
// order.
func (t *SNSTarget) Deliver(ctx context.Context, msgs []sqsonce.Delivery) []error {
	errs := make([]error, len(msgs))
	fifo := strings.HasSuffix(t.TopicARN, ".fifo")
	entries := make([]snstypes.PublishBatchRequestEntry, len(msgs))
	sizes := make([]int, len(msgs))
	for i, m := range msgs {
		entries[i], sizes[i] = snsEntryFor(i, m, fifo)
		if sizes[i] > MaxSNSBytes {
			errs[i] = refused(fmt.Errorf("targets: %d bytes with its attributes, over SNS's %d", sizes[i], MaxSNSBytes))
		}
	}
	var group func(i int) string
	if fifo {
		group = func(i int) string { return aws.ToString(entries[i].MessageGroupId) }
	}
	batches := pack(errs, func(i int) int { return sizes[i] }, maxSNSBatchEntries, MaxSNSBytes)
	sendAll(batches, group, func(batch []int) { t.publish(ctx, entries, batch, errs) })
	return errs
}

func (t *SNSTarget) publish(ctx context.Context, entries []snstypes.PublishBatchRequestEntry, batch []int, errs []error) {
	in := &sns.PublishBatchInput{TopicArn: aws.String(t.TopicARN)}
	byID := make(map[string]int, len(batch))
	for _, i := range batch {
		in.PublishBatchRequestEntries = append(in.PublishBatchRequestEntries, entries[i])
		byID[aws.ToString(entries[i].Id)] = i
	}
	if err := ctx.Err(); err != nil {
		for _, i := range byID {
			errs[i] = fmt.Errorf("targets: not sent: %w", err)
		}
		return
	}
	out, err := t.API.PublishBatch(ctx, in, func(o *sns.Options) { o.Retryer = retrybudget.Within(ctx, o.Retryer) })
	if err != nil {
		err = callError(fmt.Errorf("targets: PublishBatch to %s: %w", t.TopicARN, err), false)
		for _, i := range byID {
			errs[i] = err
		}
		return
	}
	for _, f := range out.Failed {
		if i, ok := byID[aws.ToString(f.Id)]; ok {
			err := fmt.Errorf("targets: SNS refused the message: %s: %s (sender fault: %t)", aws.ToString(f.Code), aws.ToString(f.Message), f.SenderFault)
			if f.SenderFault {
				err = refused(err)
			}
			errs[i] = err
			delete(byID, aws.ToString(f.Id))
		}
	}
	for _, s := range out.Successful {
		delete(byID, aws.ToString(s.Id))
	}
	for _, i := range byID {
		errs[i] = unknown(errors.New("targets: SNS listed the message neither as published nor as failed"))
	}
}

// snsEntryFor is m as a PublishBatch entry, with its size as SNS counts it.
func snsEntryFor(i int, m sqsonce.Delivery, fifo bool) (snstypes.PublishBatchRequestEntry, int) {
	e := snstypes.PublishBatchRequestEntry{
		Id:                aws.String(strconv.Itoa(i)),
		Message:           aws.String(m.Record.Body),
		MessageAttributes: snsAttributes(m.Record.MessageAttributes),
	}
	size := len(m.Record.Body)
	for name, v := range e.MessageAttributes {
		size += len(name) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
	}
	for _, a := range []struct{ name, value string }{{AttrKey, m.Key}, {AttrFence, strconv.FormatInt(m.Fence, 10)}} {
		if _, exists := e.MessageAttributes[a.name]; !exists && len(e.MessageAttributes) >= maxSNSAttributes {
			continue
		}
		if e.MessageAttributes == nil {
			e.MessageAttributes = map[string]snstypes.MessageAttributeValue{}
		}
		e.MessageAttributes[a.name] = snstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(a.value)}
		size += len(a.name) + len("String") + len(a.value)
	}
	if fifo {
		e.MessageGroupId = aws.String(groupID(m))
		e.MessageDeduplicationId = aws.String(sqsmsg.DeduplicationID("sqs-once", m.Key))
	}
	return e, size
}

// snsAttributes converts an SQS record's message attributes for SNS, data
// types and values copied exactly.
func snsAttributes(in map[string]events.SQSMessageAttribute) map[string]snstypes.MessageAttributeValue {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]snstypes.MessageAttributeValue, len(in))
	for name, a := range in {
		v := snstypes.MessageAttributeValue{DataType: aws.String(a.DataType), BinaryValue: slices.Clone(a.BinaryValue)}
		if a.StringValue != nil {
			v.StringValue = aws.String(*a.StringValue)
		}
		out[name] = v
	}
	return out
}
