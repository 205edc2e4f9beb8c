//go:build integration

package ops

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sqs-once/sqs-once/internal/local/redisserver"
)

// TestStoreCheckOnRedis: for a stack with STORE=redis, preflight's store
// check is redisstore's Check on the processor's REDIS_URL: it passes on a
// server that evicts nothing, and fails with the setting to change on one
// that evicts, or on a server it cannot reach.
func TestStoreCheckOnRedis(t *testing.T) {
	t.Parallel()
	srv := redisserver.Start(t)
	env := map[string]string{envStore: StoreRedis, "REDIS_URL": "redis://" + srv.Addr}
	m := &Migration{Stack: "orders-once", Processor: &Function{env: env}}

	m.readStore(t.Context(), nil, "a-table-the-redis-stack-does-not-use")
	if c := m.checkTheStore(); c.Status != CheckOK || m.Store.Store != StoreRedis {
		t.Errorf("store check on a fresh redis-server: %+v (%+v); want ok, on redis", c, m.Store)
	}

	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = client.Close() })
	if err := client.ConfigSet(t.Context(), "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	m.readStore(t.Context(), nil, "")
	c := m.checkTheStore()
	if c.Status != CheckFail || !strings.Contains(c.Detail, "allkeys-lru") || len(c.Change) != 1 || !strings.Contains(c.Change[0], "CONFIG SET maxmemory-policy noeviction") {
		t.Errorf("store check on an evicting redis-server: %+v; want FAIL naming allkeys-lru and the CONFIG SET that fixes it", c)
	}

	srv.Stop()
	m.readStore(t.Context(), nil, "")
	if c := m.checkTheStore(); c.Status != CheckFail || m.Store.State != TableUnknown || !strings.Contains(c.Change[0], "reachable") {
		t.Errorf("store check on a stopped redis-server: %+v (%+v); want FAIL saying to make it reachable", c, m.Store)
	}
}
