//go:build integration

package sqsonce

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/local/localesm"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
)

func TestFailureBackoffHidesFailedRecords(t *testing.T) {
	t.Parallel()
	b := procSetup(t, dynamoBackend, func(c *ConsumerConfig) { c.FailureBackoffBase = 10 * time.Second })
	// Visibility timeout 0: without the backoff the failed message would be
	// receivable again at once.
	url, ev := receiveEvent(t, b, map[string]string{"VisibilityTimeout": "0"}, "fails", "works")
	for _, r := range ev.Records {
		if r.Body == "fails" {
			b.handler.errs[r.MessageId] = errors.New("downstream 503")
		}
	}
	resp, _ := b.processor.Handle(context.Background(), ev)
	if len(resp.BatchItemFailures) != 1 {
		t.Fatalf("failures %v, want 1", resp.BatchItemFailures)
	}
	out, err := sqs.NewFromConfig(b.aws).ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range out.Messages {
		if aws.ToString(m.Body) == "fails" {
			t.Fatal("the failed record is visible again at once: its visibility was not changed")
		}
	}
}

// TestFailureOnTheLastReceiveIsNotDelayed: a record that fails on the last
// receive the queue's redrive policy allows (maxReceiveCount 2 here) is left
// visible, so the next receive moves it to the dead-letter queue at once
// instead of after the longest backoff of its life. Earlier failures, and a
// processor that does not know the queue (no QueueURL), back off as before.
func TestFailureOnTheLastReceiveIsNotDelayed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		receives  int
		knowQueue bool
		wantDLQ   bool
	}{
		{"last receive", 2, true, true},
		{"an earlier receive", 1, true, false},
		{"queue unknown", 2, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := procSetup(t, dynamoBackend)
			ctx := context.Background()
			client := sqs.NewFromConfig(b.aws)
			dlq := mototest.NewQueue(t, b.aws, false, nil)
			main := mototest.NewQueue(t, b.aws, false, map[string]string{
				"VisibilityTimeout": "0",
				"RedrivePolicy":     `{"deadLetterTargetArn":"` + mototest.QueueARN(t, b.aws, dlq) + `","maxReceiveCount":"2"}`,
			})
			b.cfg.FailureBackoffBase = 10 * time.Second
			if tt.knowQueue {
				b.cfg.QueueURL = main
			}
			b.processor = b.newProcessor(t)
			if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &main, MessageBody: aws.String("poison")}); err != nil {
				t.Fatal(err)
			}
			var msgs []sqstypes.Message
			for range tt.receives {
				if msgs = mototest.Receive(t, b.aws, main, 1, 5*time.Second); len(msgs) != 1 {
					t.Fatalf("received %d messages, want 1", len(msgs))
				}
			}
			ev, err := localesm.NewEvent(msgs, mototest.QueueARN(t, b.aws, main), "us-east-1")
			if err != nil {
				t.Fatal(err)
			}
			b.handler.errs[ev.Records[0].MessageId] = errors.New("downstream 503")
			if resp, _ := b.processor.Handle(ctx, ev); len(resp.BatchItemFailures) != 1 {
				t.Fatalf("failures %v, want the record", resp.BatchItemFailures)
			}
			// The main queue's visibility timeout is 0: only the backoff
			// keeps the message from this receive, which moves it to the
			// dead-letter queue once it has been received twice.
			if out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &main}); err != nil {
				t.Fatal(err)
			} else if len(out.Messages) > 0 {
				t.Fatalf("the main queue delivered the message again (receive count %d): the backoff was not applied",
					tt.receives+1)
			}
			got := mototest.Receive(t, b.aws, dlq, 1, time.Second)
			if dead := len(got) == 1; dead != tt.wantDLQ {
				t.Errorf("in the dead-letter queue: %v, want %v", dead, tt.wantDLQ)
			}
		})
	}
}
