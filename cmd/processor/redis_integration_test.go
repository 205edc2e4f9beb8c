//go:build integration && redis

package main

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/local/redisserver"
	"github.com/sqs-once/sqs-once/internal/storeenv"
	"github.com/sqs-once/sqs-once/sqsonce"
)

// Built with -tags redis, STORE=redis is the Redis store on REDIS_URL: a
// processor on it runs a key once.
func TestFromEnvRedis(t *testing.T) {
	srv := redisserver.Start(t)
	store, err := storeenv.FromEnv(envconfig.Map(map[string]string{"STORE": "redis", "REDIS_URL": "redis://" + srv.Addr}), aws.Config{}, redisFromEnv())
	if err != nil || store == nil {
		t.Fatalf("STORE=redis: %v, %v", store, err)
	}
	p, err := sqsonce.New(sqsonce.Config{Store: store, KeyPrefix: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	runs := 0
	for range 2 {
		_ = p.Do(ctx, "o-1", func(context.Context) error { runs++; return nil })
	}
	if runs != 1 {
		t.Errorf("the key ran %d times on the Redis store, want once", runs)
	}
}
