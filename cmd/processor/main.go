// Command processor is the Lambda function that consumes the main queue
// through the idempotency table; see internal/processor.
package main

import (
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/internal/lambdamain"
	"github.com/sqs-once/sqs-once/internal/processor"
)

func main() {
	lambdamain.Run(processor.LoadConfig, func(cfg processor.Config, awsCfg aws.Config) (any, error) {
		h, err := processor.NewHandler(cfg, awsCfg, handleMessage)
		if err != nil {
			return nil, err
		}
		return h.Handle, nil
	})
}
