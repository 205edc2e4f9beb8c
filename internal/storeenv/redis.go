//go:build redis

package storeenv

import (
	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/redisstore"
)

func redisFromEnv(lookup envconfig.Lookup) (store.Store, error) {
	s, err := redisstore.FromEnv(lookup)
	if err != nil {
		return nil, err
	}
	return s, nil
}
