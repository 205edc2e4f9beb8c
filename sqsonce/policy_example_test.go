package sqsonce_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/sqsoncetest"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// The whole main of a Lambda function: dynamostore.FromEnv builds the
// store on the table IDEMPOTENCY_TABLE names, FromEnv reads the variables
// the template sets (IDEMPOTENCY_KEY, LOCK_TIMEOUT, ...), and lambda.Start
// serves Handle. An invalid variable is an error naming it, before the
// first event.
func ExampleFromEnv() {
	awsCfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	st, err := dynamostore.FromEnv(os.LookupEnv, awsCfg)
	if err != nil {
		log.Fatal(err)
	}
	p, err := sqsonce.FromEnv(os.LookupEnv, sqsonce.ConsumerConfig{Config: sqsonce.Config{Store: st}, AWS: awsCfg}, func(ctx context.Context, msg events.SQSMessage) error {
		return ship(ctx, sqsonce.Key(ctx), msg.Body)
	})
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(p.Handle)
}

func ship(context.Context, string, string) error { return nil }

// Key is the idempotency key the function runs for: with ConsumerConfig.Key
// KeyFromBody("/orderId"), the order id, whichever message brought it.
// (A handler's own unit test sets it with sqsoncetest.Context.)
func ExampleKey() {
	ctx := context.Background()
	p, err := sqsonce.NewConsumer(sqsonce.ConsumerConfig{
		Config: sqsonce.Config{
			Store:     sqsoncetest.NewStore(),
			KeyPrefix: "keys",
			Logger:    slog.New(slog.DiscardHandler),
		},
		Key: sqsonce.KeyFromBody("/orderId"),
	}, func(ctx context.Context, msg events.SQSMessage) error {
		fmt.Printf("message %s runs for key %s\n", msg.MessageId, sqsonce.Key(ctx))
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	_, _ = p.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-7", Body: `{"orderId":"B-12","total":40}`, EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders"},
	}})
	fmt.Printf("outside a lock: %q\n", sqsonce.Key(ctx))
	// Output:
	// message m-7 runs for key B-12
	// outside a lock: ""
}

// InProgressPolicy decides what Handle answers for a delivery whose key
// another holder is processing right now. Here a second delivery of the
// order arrives while the first one's handler still runs: with
// InProgressRetry it is reported failed and SQS delivers it again later;
// with InProgressDrop it is reported done, and is lost if the first holder
// then fails.
func ExampleInProgressPolicy() {
	ctx := context.Background()
	orders := "arn:aws:sqs:us-east-1:123456789012:orders"
	for _, policy := range []sqsonce.InProgressPolicy{sqsonce.InProgressRetry, sqsonce.InProgressDrop} {
		var p *sqsonce.Processor
		p, err := sqsonce.NewConsumer(sqsonce.ConsumerConfig{
			Config: sqsonce.Config{
				Store:     sqsoncetest.NewStore(),
				KeyPrefix: "policy",
				Logger:    slog.New(slog.DiscardHandler),
			},
			Key:        sqsonce.KeyFromBody("/orderId"),
			InProgress: policy,
		}, func(ctx context.Context, msg events.SQSMessage) error {
			if msg.MessageId != "first" {
				return nil
			}
			// The second delivery, handled while this one holds the key.
			resp, err := p.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{
				{MessageId: "second", Body: msg.Body, EventSourceARN: orders},
			}})
			fmt.Printf("%s: second delivery, records to retry: %d %v\n", policy, len(resp.BatchItemFailures), err)
			return nil
		})
		if err != nil {
			log.Fatal(err)
		}
		_, _ = p.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{
			{MessageId: "first", Body: `{"orderId":"C-3"}`, EventSourceARN: orders},
		}})
	}
	// Output:
	// retry: second delivery, records to retry: 1 <nil>
	// drop: second delivery, records to retry: 0 <nil>
}
