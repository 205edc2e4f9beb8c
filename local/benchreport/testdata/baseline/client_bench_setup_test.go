package sqsonce_test

import (
	"io"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/sqsonce"
)

// newClientProcessor is BenchmarkClient's processor, built with the
// baseline's API (8ee3409: the DynamoDB store named by Config.Table, one
// Config for every use). benchreport writes it over the baseline's
// sqsonce/client_bench_setup_test.go; this tree's own is in sqsonce/.
func newClientProcessor(awsCfg aws.Config, key sqsonce.KeySource, cache int, h sqsonce.Handler) (*sqsonce.Processor, error) {
	return sqsonce.New(sqsonce.Config{
		AWS:        awsCfg,
		Table:      "bench-table",
		KeyPrefix:  "bench",
		LocalCache: cache,
		Key:        key,
		Logger:     slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Metrics:    io.Discard,
	}, h)
}
