// Command processor is the Lambda function that consumes the main queue
// through the idempotency table. It is the first user of package sqsonce,
// and uses nothing else of this module: replace handleMessage with your side
// effect, or write the same few lines in your own module. With TARGET set,
// the records go to that target (an existing consumer function, a queue, a
// topic or a bus) instead of handleMessage.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/sqs-once/sqs-once/sqsonce"
)

// exitBadConfig ends the init phase when the environment is wrong, so Lambda
// reports an init error and no event is ever handled with it.
const exitBadConfig = 2

func main() {
	slog.SetDefault(lambdacontext.NewLogger())
	p, err := newProcessor(context.Background())
	if err != nil {
		slog.Error("invalid configuration", "error", err)
		os.Exit(exitBadConfig)
	}
	lambda.Start(p.Handle)
}

// newProcessor is sqsonce.FromEnv, with handleMessage only when no TARGET
// takes the records (and so, like FromEnv, with metrics on standard output).
func newProcessor(ctx context.Context) (*sqsonce.Processor, error) {
	cfg, err := sqsonce.ConfigFromEnv(os.LookupEnv)
	if err != nil {
		return nil, err
	}
	if cfg.AWS, err = config.LoadDefaultConfig(ctx); err != nil {
		return nil, fmt.Errorf("load the AWS configuration: %w", err)
	}
	// CloudWatch Logs extracts the metrics from the function's output.
	cfg.Metrics = os.Stdout
	var h sqsonce.Handler = handleMessage
	if cfg.Target != "" {
		h = nil
	}
	return sqsonce.New(cfg, h)
}
