//go:build !redis

package storeenv

import (
	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/sqsonce/store"
)

func redisFromEnv(envconfig.Lookup) (store.Store, error) { return nil, noRedis() }
