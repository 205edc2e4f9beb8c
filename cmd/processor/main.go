// Command processor is the Lambda function that consumes the main queue
// through the idempotency table. It is the first user of package sqsonce,
// and uses nothing else of this module: replace handleMessage with your side
// effect, or write the same few lines in your own module.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/sqs-once/sqs-once/sqsonce"
)

// exitBadConfig ends the init phase when the environment is wrong, so Lambda
// reports an init error and no event is ever handled with it.
const exitBadConfig = 2

func main() {
	slog.SetDefault(lambdacontext.NewLogger())
	p, err := sqsonce.FromEnv(context.Background(), handleMessage)
	if err != nil {
		slog.Error("invalid configuration", "error", err)
		os.Exit(exitBadConfig)
	}
	lambda.Start(p.Handle)
}
