//go:build integration

package sqsonce

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// TestAPITheSameKeyWithAnotherBodyGoesToTheOperatorQueue, on moto_server
// through the DynamoDB store (as a deployed function has it) and a real
// operator queue.
func TestAPITheSameKeyWithAnotherBodyGoesToTheOperatorQueue(t *testing.T) {
	t.Parallel()
	awsCfg := mototest.Config(t)
	operator := mototest.NewQueue(t, awsCfg, false, nil)
	p, err := NewConsumer(ConsumerConfig{
		Config: Config{
			Store:     dynamostore.New(dynamodb.NewFromConfig(awsCfg), mototest.NewIdempotencyTable(t, awsCfg)),
			KeyPrefix: "test",
			Logger:    lockQuiet,
		},
		AWS:              awsCfg,
		ValidatePayload:  true,
		Key:              KeyFromBody("/orderId"),
		OperatorQueueURL: operator,
	}, func(context.Context, events.SQSMessage) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	arn := "arn:aws:sqs:us-east-1:123456789012:orders"
	for _, m := range []events.SQSMessage{
		{MessageId: "m-1", Body: `{"orderId":"A","amount":10}`, EventSourceARN: arn},
		{MessageId: "m-2", Body: `{"orderId":"A","amount":10}`, EventSourceARN: arn},    // a duplicate
		{MessageId: "m-3", Body: `{"orderId":"A","amount":99999}`, EventSourceARN: arn}, // a conflict
	} {
		resp, err := p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{m}})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("%s: %v %v, want it done (processed, duplicate or forwarded)", m.MessageId, resp, err)
		}
	}
	got := mototest.Receive(t, awsCfg, operator, 1, 5*time.Second)
	if len(got) != 1 || aws.ToString(got[0].Body) != `{"orderId":"A","amount":99999}` ||
		Reason(aws.ToString(got[0].MessageAttributes[AttrReason].StringValue)) != ReasonPayloadMismatch {
		t.Fatalf("operator queue holds %d messages (%v), want the conflicting one with reason payload-mismatch", len(got), got)
	}
}
