//go:build integration

package redisstore_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sqs-once/sqs-once/internal/local/redisserver"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/redisstore"
	"github.com/sqs-once/sqs-once/sqsonce/store/storetest"
)

// newStore is a store on addr, its client closed when t ends.
func newStore(t testing.TB, addr string, opts redisstore.Options) (*redisstore.Store, *redis.Client) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	s, err := redisstore.New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

// TestStoreOnRedis: the store passes the conformance suite on redis-server,
// every rule on one server (the rules keep to ids of their own).
func TestStoreOnRedis(t *testing.T) {
	t.Parallel()
	srv := redisserver.Start(t)
	storetest.TestStore(t, func(t *testing.T) store.Store {
		s, _ := newStore(t, srv.Addr, redisstore.Options{})
		return s
	})
}
