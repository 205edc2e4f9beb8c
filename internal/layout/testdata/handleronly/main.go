// Command handleronly is the smallest program a library user writes: a
// Handler behind sqsonce.FromEnv on the DynamoDB store, started by
// lambda.Start. The layout test
// lists what it links.
package main

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

func main() {
	ctx := context.Background()
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	store, err := dynamostore.FromEnv(os.LookupEnv, awsCfg)
	if err != nil {
		log.Fatal(err)
	}
	p, err := sqsonce.FromEnv(os.LookupEnv, sqsonce.ConsumerConfig{Config: sqsonce.Config{Store: store}, AWS: awsCfg}, func(context.Context, events.SQSMessage) error { return nil })
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(p.Handle)
}
