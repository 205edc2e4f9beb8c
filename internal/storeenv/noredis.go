//go:build !redis

package storeenv

import (
	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/sqsonce"
)

func redisFromEnv(envconfig.Lookup) (sqsonce.Store, error) { return nil, noRedis() }
