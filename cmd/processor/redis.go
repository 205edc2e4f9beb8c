//go:build redis

package main

import (
	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/storeenv"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/redisstore"
)

// redisFromEnv is STORE=redis in a build with the tag redis: the Redis
// store on REDIS_URL.
func redisFromEnv() storeenv.RedisFromEnv {
	return func(lookup envconfig.Lookup) (store.Store, error) {
		s, err := redisstore.FromEnv(lookup)
		if err != nil {
			// Not s: a nil *redisstore.Store in a store.Store is not nil.
			return nil, err
		}
		return s, nil
	}
}
