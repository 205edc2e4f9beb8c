// Command doonly uses sqsonce for Do alone (an API handler, a cron job): a
// Processor without a Handler, its AWS configuration from the default
// chain. The layout test lists what it links.
package main

import (
	"context"
	"log"

	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/sqs-once/sqs-once/sqsonce"
)

func main() {
	ctx := context.Background()
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	p, err := sqsonce.New(sqsonce.Config{Table: "idempotency", KeyPrefix: "jobs", AWS: awsCfg}, nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Do(ctx, "nightly-report", func(context.Context) error { return nil }); err != nil {
		log.Fatal(err)
	}
}
