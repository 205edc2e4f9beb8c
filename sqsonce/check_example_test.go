package sqsonce_test

import (
	"context"
	"errors"
	"log"

	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/sqs-once/sqs-once/sqsonce"
)

// A deploy step (or a test) that checks the table before the first message:
// here one that accepts a table without TTL, as a local emulator has, and
// fails on anything that would make the processor fail. Without the
// exception, fail on any error. (Compiled, not run: it needs a table.)
func ExampleProcessor_Check() {
	ctx := context.Background()
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	p, err := sqsonce.New(sqsonce.Config{Table: "orders-idempotency", KeyPrefix: "orders", AWS: awsCfg}, nil)
	if err != nil {
		log.Fatal(err)
	}
	switch err := p.Check(ctx); {
	case err == nil:
	case errors.Is(err, sqsonce.ErrNoTTL) && !errors.Is(err, sqsonce.ErrMisconfigured):
		log.Print(err) // the table works, and grows: records are never deleted
	default:
		log.Fatal(err) // names the table and region, and what to change
	}
}
