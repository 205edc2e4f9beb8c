// Package lambdamain is the start-up both Lambda functions share: logs through
// lambdacontext (JSON, with the request id) opened by a line naming the
// release, configuration read and checked before the first event, SDK
// configuration loaded once.
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
	"github.com/sqs-once/sqs-once/internal/version"
)

// Exit statuses of a start-up that fails.
const (
	ExitBadConfig = 2
	ExitNoAWS     = 1
)

// Start makes the function's logs Lambda's JSON lines with the request id,
// and logs "sqs-once <function> starting" with the release: once per
// execution environment, in its init phase, before anything that can fail,
// so every log group says which version wrote it (at INFO: the template's
// LogLevel WARN or ERROR leaves it out).
func Start(function string) {
	slog.SetDefault(lambdacontext.NewLogger())
	slog.Info("sqs-once "+function+" starting", "version", version.Version)
}

// Run starts function (Start), loads its configuration from the
// environment, builds its handler and hands it to lambda.Start. A bad
// configuration ends the process in the init phase with every bad variable
// named, so Lambda reports an init error and no event is ever handled with
// it.
func Run[C any](function string, load func(envconfig.Lookup) (C, error), handler func(C, aws.Config) (any, error)) {
	Start(function)
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
