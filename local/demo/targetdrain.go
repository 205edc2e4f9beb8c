package demo

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/local/localesm"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

const (
	// drainVisibility hides a received message of the target queue while
	// its delete is on the way; one whose delete failed, or whose receive's
	// answer was lost on a loaded machine, comes back after it and is
	// recognised by its MessageId. The run waits that long for the queue to
	// be empty, so it is short.
	drainVisibility = 15 * time.Second
	// drainMinWait is the least time the final drain gets, even when the
	// run has used up -wait: what did arrive is still counted.
	drainMinWait = 30 * time.Second
	// drainReceiveErrors consecutive failed receives end the final drain
	// (the SDK has retried each already); during the run the consumer
	// pauses consumePause after a failed receive instead.
	drainReceiveErrors = 3
	consumePause       = time.Second
)

// Landing is one message found in the target queue, as a consumer of that
// queue receives it.
type Landing struct {
	MessageID  string
	Body       string
	Attributes map[string]sqstypes.MessageAttributeValue
}

// Key is the idempotency key the message was forwarded under, from the
// attribute the sqs target adds; "" when it is missing.
func (l Landing) Key() string { return aws.ToString(l.Attributes[targets.AttrKey].StringValue) }

// Fence is the fencing token of the lock the message was forwarded under;
// false when the attribute is missing or not a positive integer.
func (l Landing) Fence() (int64, bool) {
	n, err := strconv.ParseInt(aws.ToString(l.Attributes[targets.AttrFence].StringValue), 10, 64)
	return n, err == nil && n > 0
}

// targetConsumer reads the target queue as a consumer downstream of
// sqs-once would: it receives every message with its attributes, records
// it, and deletes it. It reads during the run, not only at the end, because
// moto_server's SendMessageBatch and ReceiveMessage take time in proportion
// to the messages a queue holds (about 130 ms per call at 750 messages on a
// 2-core machine): a target queue left to fill up would slow every delivery
// until the processor's 1 s invocations ran out of time in mid-send. Each
// SQS message is recorded once, even if received again because its delete
// failed. Safe for concurrent use.
type targetConsumer struct {
	api localesm.SQSAPI
	url string

	mu       sync.Mutex
	seen     map[string]bool
	landings []Landing
}

func newTargetConsumer(api localesm.SQSAPI, url string) *targetConsumer {
	return &targetConsumer{api: api, url: url, seen: map[string]bool{}}
}

// receive makes one receive, records what it brought and deletes it, and
// reports how many messages it brought.
func (c *targetConsumer) receive(ctx context.Context) (int, error) {
	res, err := c.api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:              aws.String(c.url),
		MaxNumberOfMessages:   10,
		WaitTimeSeconds:       1,
		VisibilityTimeout:     int32(drainVisibility / time.Second),
		MessageAttributeNames: []string{"All"},
	})
	if err != nil {
		return 0, err
	}
	var del []sqstypes.DeleteMessageBatchRequestEntry
	c.mu.Lock()
	for _, m := range res.Messages {
		if id := aws.ToString(m.MessageId); !c.seen[id] {
			c.seen[id] = true
			c.landings = append(c.landings, Landing{MessageID: id, Body: aws.ToString(m.Body), Attributes: m.MessageAttributes})
		}
		del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(len(del))), ReceiptHandle: m.ReceiptHandle})
	}
	c.mu.Unlock()
	if len(del) > 0 {
		// A failed delete only brings the message back, recorded once. The
		// delete goes through even when the run is stopping.
		_, _ = c.api.DeleteMessageBatch(context.WithoutCancel(ctx), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(c.url), Entries: del})
	}
	return len(res.Messages), nil
}

// consume receives until ctx ends: the consumer running beside the
// pipeline.
func (c *targetConsumer) consume(ctx context.Context) {
	for ctx.Err() == nil {
		if _, err := c.receive(ctx); err != nil && ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(consumePause):
			}
		}
	}
}

// drain receives until a receive finds nothing and the queue holds nothing
// (visible, in flight or delayed), or until deadline: the last sweep once
// the pipeline has stopped, so nothing arrives meanwhile. The error says
// why it stopped early.
func (c *targetConsumer) drain(ctx context.Context, deadline time.Time) error {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for failures := 0; ; {
		n, err := c.receive(ctx)
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("gave up draining the target queue %s: %w", c.url, ctx.Err())
		case err != nil:
			if failures++; failures == drainReceiveErrors {
				return fmt.Errorf("drain the target queue %s: %w", c.url, err)
			}
			continue
		}
		failures = 0
		if n > 0 {
			continue
		}
		if depth, err := queueDepth(ctx, c.api, c.url); err == nil && depth == 0 {
			return nil
		}
	}
}

// Landings is every message received so far, in order of arrival.
func (c *targetConsumer) Landings() []Landing {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.landings)
}
