package storeenv

import (
	"fmt"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/sqsonce"
)

// The STORE values.
const (
	DynamoDB = "dynamodb"
	Redis    = "redis"
)

// FromEnv returns the store STORE names: nil for dynamodb (sqsonce.New
// then builds the DynamoDB store on IDEMPOTENCY_TABLE), the Redis store for
// redis in a build with the tag redis. The store lives as long as the
// process (a Lambda function's). The error names the variable.
func FromEnv(lookup envconfig.Lookup) (sqsonce.Store, error) {
	r := envconfig.NewReader(lookup)
	kind := r.OneOf("STORE", DynamoDB, DynamoDB, Redis)
	if err := r.Err(); err != nil {
		return nil, err
	}
	if kind == DynamoDB {
		return nil, nil
	}
	return redisFromEnv(lookup)
}

// noRedis is STORE=redis in a build without the Redis store.
func noRedis() error {
	return fmt.Errorf("STORE=%s: this processor was built without the Redis store (it links no Redis client); build it with `go build -tags redis ./cmd/processor` (docs/redis.md)", Redis)
}
