// Package lambdamain is the start-up both Lambda functions share: logs through
// lambdacontext (JSON, with the request id), configuration read and checked
// before the first event, SDK configuration loaded once.
package lambdamain

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/sqs-once/sqs-once/internal/envconfig"
)

// Exit statuses of a start-up that fails.
const (
	ExitBadConfig = 2
	ExitNoAWS     = 1
)

// Run loads the function's configuration from the environment, builds its
// handler and hands it to lambda.Start. A bad configuration ends the process
// in the init phase with every bad variable named, so Lambda reports an init
// error and no event is ever handled with it.
func Run[C any](load func(envconfig.Lookup) (C, error), handler func(C, aws.Config) (any, error)) {
	slog.SetDefault(lambdacontext.NewLogger())
	cfg, err := load(os.LookupEnv)
	if err != nil {
		slog.Error("invalid configuration", "error", err)
		os.Exit(ExitBadConfig)
	}
	awsCfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		slog.Error("load AWS configuration", "error", err)
		os.Exit(ExitNoAWS)
	}
	h, err := handler(cfg, awsCfg)
	if err != nil {
		slog.Error("invalid configuration", "error", err)
		os.Exit(ExitBadConfig)
	}
	lambda.Start(h)
}
