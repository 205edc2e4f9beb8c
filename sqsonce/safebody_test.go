package sqsonce

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/retrybudget/retrybudgettest"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// The clients New builds (DynamoDB for the default store, SQS for the
// failure backoff) carry retrybudget.SafeRequestBody: a write the service
// answered is never sent again for net/http's late drain of the body
// (retrybudget's body_moto_test.go shows the duplicate without it).
func TestProcessorClientsNeverRepeatAnAnsweredCall(t *testing.T) {
	check := &retrybudgettest.BodyCheck{}
	awsCfg := check.Config()
	st, err := dynamostore.FromEnv(envconfig.Map(map[string]string{"IDEMPOTENCY_TABLE": "t"}), awsCfg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewConsumer(ConsumerConfig{Config: Config{Store: st, KeyPrefix: "p", Logger: lockQuiet}, AWS: awsCfg, FailureBackoffBase: 10e9}, func(context.Context, events.SQSMessage) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Do(context.Background(), "k", func(context.Context) error { return nil })
	if _, err := p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{
		MessageId: "m-1", ReceiptHandle: "rh", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:q",
		Attributes: map[string]string{"ApproximateReceiveCount": "1"},
	}}}); err != nil {
		t.Fatal(err)
	}
	sends, writerTos := check.Counts()
	if sends < 3 { // Do's acquire, the record's acquire, the backoff's visibility change
		t.Fatalf("%d requests reached the HTTP client, want at least 3: the test proved nothing", sends)
	}
	if writerTos != 0 {
		t.Errorf("%d of %d requests handed net/http a body with WriteTo: a client lacks retrybudget.SafeRequestBody", writerTos, sends)
	}
}
