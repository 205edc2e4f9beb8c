// Command processor is the Lambda function that consumes the main queue
// through the idempotency table; see internal/processor.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/sqs-once/sqs-once/internal/processor"
)

func main() {
	slog.SetDefault(lambdacontext.NewLogger())
	cfg, err := processor.LoadConfig(os.LookupEnv)
	if err != nil {
		// Failing the init phase makes every invocation fail with this
		// message in the function's log, instead of running unguarded.
		slog.Error("invalid configuration", "error", err)
		os.Exit(2)
	}
	awsCfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		slog.Error("load AWS configuration", "error", err)
		os.Exit(1)
	}
	h := processor.NewHandler(cfg, awsCfg, handleMessage)
	lambda.Start(h.Handle)
}
