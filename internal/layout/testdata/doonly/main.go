// Command doonly uses sqsonce for Do alone (an API handler, a cron job): a
// Processor from New on the DynamoDB store, its AWS configuration
// from the default chain. The layout test lists what it links.
package main

import (
	"context"
	"log"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

func main() {
	ctx := context.Background()
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	store := dynamostore.New(dynamodb.NewFromConfig(awsCfg), "idempotency")
	p, err := sqsonce.New(sqsonce.Config{Store: store, KeyPrefix: "jobs"})
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Do(ctx, "nightly-report", func(context.Context) error { return nil }); err != nil {
		log.Fatal(err)
	}
}
