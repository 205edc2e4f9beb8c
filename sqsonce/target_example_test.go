//go:build integration

package sqsonce_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/sqsoncetest"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// A Target instead of a Handler: each key's message is sent on to another
// queue once, with its key in the sqs-once-key attribute. No code of yours
// runs; targets.ToFunction puts sqs-once in front of an existing consumer.
// (It runs against the tests' moto_server: go test -tags integration.)
func ExampleConfig_target() {
	ctx := context.Background()
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	client := sqs.NewFromConfig(awsCfg)
	// The queue the messages go to: created here, so that the example runs.
	dest, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("orders-once")})
	if err != nil {
		log.Fatal(err)
	}
	queue, err := targets.ToQueue(awsCfg, aws.ToString(dest.QueueUrl))
	if err != nil {
		log.Fatal(err)
	}
	p, err := sqsonce.NewConsumer(sqsonce.ConsumerConfig{
		Config: sqsonce.Config{
			Store:     sqsoncetest.NewStore(), // in memory: the example needs no table
			KeyPrefix: "forwarder",
			Logger:    slog.New(slog.DiscardHandler),
		},
		Key:    sqsonce.KeyFromBody("/orderId"),
		Target: queue, // its own client, from awsCfg
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	// A producer sent order B-7 twice; then SQS delivers both again.
	batch := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1", Body: `{"orderId":"B-7"}`, EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders"},
	}}
	for range 2 {
		if _, err := p.Handle(ctx, batch); err != nil {
			log.Fatal(err)
		}
		batch.Records[0].MessageId += "-again"
	}
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: dest.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: []string{targets.AttrKey},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range out.Messages {
		fmt.Println(aws.ToString(m.Body), aws.ToString(m.MessageAttributes[targets.AttrKey].StringValue))
	}
	// Output:
	// {"orderId":"B-7"} B-7
}
