// Command processor is the Lambda function that consumes the main queue
// through the idempotency table. It is a thin user of package sqsonce:
// replace handleMessage with your side effect, or write the same few lines
// in your own module. With TARGET set, the records go to that target (an
// existing consumer function, a queue, a topic or a bus, package
// sqsonce/targets) instead of handleMessage.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/sqs-once/sqs-once/internal/lambdamain"
	"github.com/sqs-once/sqs-once/internal/storeenv"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// exitBadConfig ends the init phase when the environment is wrong, so Lambda
// reports an init error and no event is ever handled with it.
const exitBadConfig = 2

func main() {
	lambdamain.Start("processor")
	p, err := newProcessor(context.Background(), os.LookupEnv)
	if err != nil {
		slog.Error("invalid configuration", "error", err)
		os.Exit(exitBadConfig)
	}
	lambda.Start(p.Handle)
}

// newProcessor is sqsonce.FromEnv with the store STORE names
// (internal/storeenv) and TARGET read by targets.FromEnv: handleMessage runs
// only when no target takes the records.
func newProcessor(ctx context.Context, lookup func(string) (string, bool)) (*sqsonce.Processor, error) {
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load the AWS configuration: %w", err)
	}
	t, terr := targets.FromEnv(lookup, awsCfg, slog.Default())
	store, serr := storeenv.FromEnv(lookup, awsCfg, redisFromEnv())
	if terr != nil || serr != nil {
		// Every bad variable at once: the target's, the store's and the
		// processor's.
		_, cerr := sqsonce.ConfigFromEnv(lookup)
		return nil, errors.Join(cerr, terr, serr)
	}
	var h sqsonce.Handler = handleMessage
	if t != nil {
		h = nil
	}
	return sqsonce.FromEnv(lookup, sqsonce.ConsumerConfig{Config: sqsonce.Config{Store: store}, AWS: awsCfg, Target: t}, h)
}
