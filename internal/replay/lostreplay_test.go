//go:build integration

package replay

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/local/localesm"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/sqsoncetest"
)

// A replay to a standard main queue whose answer is lost after SQS applied
// it (an error or a reset after the send) is sent again by the SDK, and a
// standard queue keeps both: two copies of the replay. This is the
// at-least-once the product is built for, not a loss of the guarantee:
// both copies carry the original message id, so the processor keyed by it
// runs the message once. (It is what made a loaded run of
// TestDeadLetterReplayedToDeployedMainQueue see "2 messages on main".)
func TestLostReplayAnswerMakesACopyTheProcessorSuppresses(t *testing.T) {
	t.Parallel()
	p, err := faultproxy.Start(mototest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	cfg := mototest.Config(t)
	mainURL, opURL := mototest.NewQueue(t, cfg, false, nil), mototest.NewQueue(t, cfg, false, nil)
	c, err := LoadConfig(envconfig.Map(map[string]string{"MAIN_QUEUE_URL": mainURL, "OPERATOR_QUEUE_URL": opURL, "BACKOFF_BASE": "0"}))
	if err != nil {
		t.Fatal(err)
	}
	client := sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		o.BaseEndpoint = aws.String(p.URL)
		o.Retryer = retry.AddWithMaxBackoffDelay(retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter = ratelimit.None }), 10*time.Millisecond)
	})
	p.Script("SendMessageBatch", faultproxy.FailAfter)
	const original = "orig-lost-replay"
	dead := record("dlq-copy", `{"orderId":"o-1"}`, nil)
	dead.Attributes["ApproximateReceiveCount"] = "1"
	resp, err := New(c, Deps{SQS: client}).Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{withOriginal(dead, original)}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %v, %v; want the replay accepted (on the SDK's retry)", resp, err)
	}
	if p.Pending() != 0 {
		t.Fatal("the scripted fault did not fire")
	}
	got := mototest.Receive(t, cfg, mainURL, 2, 5*time.Second)
	if len(got) != 2 {
		t.Fatalf("%d copies on the main queue, want 2: the send applied, its answer lost, and sent again", len(got))
	}
	ev, err := localesm.NewEvent(got, "arn:aws:sqs:"+cfg.Region+":123456789012:main", cfg.Region)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ev.Records {
		if id, _ := sqsmsg.OriginalMessageID(r); id != original {
			t.Fatalf("copy %s carries original id %q, want %q", r.MessageId, id, original)
		}
	}
	// The processor, keyed by message id (the original one on a replay),
	// runs the key once for the two copies.
	runs := 0
	proc, err := sqsonce.NewConsumer(sqsonce.ConsumerConfig{Config: sqsonce.Config{Store: sqsoncetest.NewStore(), KeyPrefix: "orders"}}, func(context.Context, events.SQSMessage) error {
		runs++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := proc.Handle(context.Background(), ev)
	if err != nil || len(out.BatchItemFailures) != 0 || runs != 1 {
		t.Fatalf("processing the copies: %v, %v, handler ran %d times; want once, nothing failed", out, err, runs)
	}
}

// withOriginal marks rec as a dead letter of the message first sent as id.
func withOriginal(rec events.SQSMessage, id string) events.SQSMessage {
	if rec.MessageAttributes == nil {
		rec.MessageAttributes = map[string]events.SQSMessageAttribute{}
	}
	rec.MessageAttributes[sqsmsg.AttrOriginalMessageID] = events.SQSMessageAttribute{DataType: "String", StringValue: aws.String(id)}
	return rec
}
