package storeenv

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// The STORE values.
const (
	DynamoDB = "dynamodb"
	Redis    = "redis"
)

// RedisFromEnv builds the Redis store from the environment
// (redisstore.FromEnv). The processor passes it when built with the tag
// redis, nil otherwise: the Redis store is a module of its own, and this
// package, in the library's module, must not import it, or every library
// user would carry the Redis client in its module graph.
type RedisFromEnv func(envconfig.Lookup) (store.Store, error)

// FromEnv returns the store STORE names, the one place it is read: for
// dynamodb the DynamoDB store on IDEMPOTENCY_TABLE through a client on
// awsCfg (dynamostore.FromEnv), for redis the Redis store on REDIS_URL
// built by redis (nil: a processor built without it, refused with how to
// build one). The store lives as long as the process (a Lambda
// function's). The error names the variables.
func FromEnv(lookup envconfig.Lookup, awsCfg aws.Config, redis RedisFromEnv) (store.Store, error) {
	r := envconfig.NewReader(lookup)
	kind := r.OneOf("STORE", DynamoDB, DynamoDB, Redis)
	if err := r.Err(); err != nil {
		return nil, err
	}
	if kind == DynamoDB {
		return dynamostore.FromEnv(lookup, awsCfg)
	}
	if redis == nil {
		return nil, noRedis()
	}
	return redis(lookup)
}

// noRedis is STORE=redis in a build without the Redis store.
func noRedis() error {
	return fmt.Errorf("STORE=%s: this processor was built without the Redis store (it links no Redis client); build it with `go build -tags redis ./cmd/processor` (docs/redis.md)", Redis)
}
