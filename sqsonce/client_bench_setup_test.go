package sqsonce_test

import (
	"io"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// newClientProcessor is BenchmarkClient's processor, built with this tree's
// API. It lives apart from client_bench_test.go, which local/benchreport
// copies into its baseline tree: there, a copy written for the baseline's
// API (local/benchreport/testdata/baseline) replaces this file.
func newClientProcessor(awsCfg aws.Config, key sqsonce.KeySource, cache int, h sqsonce.Handler) (*sqsonce.Processor, error) {
	st, err := dynamostore.FromEnv(envconfig.Map(map[string]string{"IDEMPOTENCY_TABLE": "bench-table"}), awsCfg)
	if err != nil {
		return nil, err
	}
	return sqsonce.NewConsumer(sqsonce.ConsumerConfig{
		Config: sqsonce.Config{
			Store:      st,
			KeyPrefix:  "bench",
			LocalCache: cache,
			Logger:     slog.New(slog.NewJSONHandler(io.Discard, nil)),
		},
		AWS:     awsCfg,
		Key:     key,
		Metrics: io.Discard,
	}, h)
}
