package dynamostore_test

import (
	"context"
	"errors"
	"log"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// A deploy step (or a test) that checks the table before the first message:
// here one that accepts a table without TTL, as a local emulator has, and
// fails on anything that would make the processor fail. Without the
// exception, fail on any error. (Compiled, not run: it needs a table.) A
// Processor on the store runs the same check with its Check.
func ExampleStore_Check() {
	ctx := context.Background()
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	s := dynamostore.New(dynamodb.NewFromConfig(awsCfg), "orders-idempotency")
	switch err := s.Check(ctx); {
	case err == nil:
	case errors.Is(err, dynamostore.ErrNoTTL) && !errors.Is(err, store.ErrMisconfigured):
		log.Print(err) // the table works, and grows: records are never deleted
	default:
		log.Fatal(err) // names the table and region, and what to change
	}
}
