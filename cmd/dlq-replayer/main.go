// Command dlq-replayer is the DLQ replayer Lambda function: it re-sends dead
// letters to the main queue with exponential, jittered backoff, or to an
// operator queue (see internal/replay).
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/sqs-once/sqs-once/internal/replay"
)

func main() {
	slog.SetDefault(lambdacontext.NewLogger())
	cfg, err := replay.LoadConfig(os.LookupEnv)
	if err != nil {
		slog.Error("invalid configuration", "error", err)
		os.Exit(2)
	}
	awsCfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		slog.Error("load AWS configuration", "error", err)
		os.Exit(1)
	}
	lambda.Start(replay.NewHandler(cfg, awsCfg).Handle)
}
