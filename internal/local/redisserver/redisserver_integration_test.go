//go:build integration

package redisserver_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sqs-once/sqs-once/internal/local/redisserver"
)

// TestStartRestartStop: the server answers, a restart empties it and it
// answers again on the same address, and a stopped server refuses.
func TestStartRestartStop(t *testing.T) {
	srv := redisserver.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	defer c.Close()
	ctx := t.Context()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET on a started server: %v\n%s", err, srv.Log())
	}
	// No persistence: nothing on disk.
	if v := c.ConfigGet(ctx, "appendonly").Val()["appendonly"]; v != "no" {
		t.Errorf("appendonly is %q; want no", v)
	}
	srv.Restart()
	_ = c.Ping(ctx).Err() // the old connection is gone; the pool dials again
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Errorf("after Restart, EXISTS k = %d, %v; want 0: a server without persistence comes back empty", n, err)
	}
	srv.Stop()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Error("PING on a stopped server succeeded")
	}
	srv.Stop() // again: nothing
}

// TestProxyLosesOneAnswer: the proxy forwards, and an armed loss drops
// the answer of the matching command after the server applied it.
func TestProxyLosesOneAnswer(t *testing.T) {
	srv := redisserver.Start(t)
	p := redisserver.NewProxy(t, srv.Addr)
	via := redis.NewClient(&redis.Options{Addr: p.Addr, MaxRetries: -1})
	defer via.Close()
	direct := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer direct.Close()
	ctx := t.Context()
	if err := via.Set(ctx, "a", "1", 0).Err(); err != nil {
		t.Fatalf("SET through the proxy: %v", err)
	}
	p.LoseAnswer([]byte("INCR"))
	if err := via.Incr(ctx, "n").Err(); err == nil {
		t.Fatal("INCR whose answer was lost succeeded (without retries)")
	}
	if p.Lost() != 1 || p.Armed() != 0 {
		t.Errorf("Lost %d, Armed %d; want 1, 0", p.Lost(), p.Armed())
	}
	if n, _ := direct.Get(ctx, "n").Int(); n != 1 {
		t.Errorf("the server has n = %d; want 1: the command was applied, only its answer lost", n)
	}
	if v, err := via.Get(ctx, "a").Result(); err != nil || v != "1" {
		t.Errorf("GET through the proxy after the loss: %q, %v; want the next connection to work", v, err)
	}
}
