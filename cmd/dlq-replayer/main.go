// Command dlq-replayer is the DLQ replayer Lambda function: it re-sends dead
// letters to the main queue with exponential, jittered backoff, or to an
// operator queue (see internal/replay).
package main

import (
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/internal/lambdamain"
	"github.com/sqs-once/sqs-once/internal/replay"
)

func main() {
	lambdamain.Run("dlq-replayer", replay.LoadConfig, func(cfg replay.Config, awsCfg aws.Config) (any, error) {
		// CloudWatch Logs extracts the metrics from the function's output.
		return replay.NewHandlerWith(cfg, awsCfg, replay.Deps{Metrics: os.Stdout}).Handle, nil
	})
}
