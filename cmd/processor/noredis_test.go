//go:build !redis

package main

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/storeenv"
)

// The default build refuses STORE=redis, saying how to build a processor
// that has it.
func TestFromEnvRedisInTheDefaultBuild(t *testing.T) {
	_, err := storeenv.FromEnv(envconfig.Map(map[string]string{"STORE": "redis", "REDIS_URL": "redis://127.0.0.1:1"}), aws.Config{}, redisFromEnv())
	if err == nil || !strings.Contains(err.Error(), "-tags redis") {
		t.Errorf("STORE=redis in the default build: %v; want an error saying to build with -tags redis", err)
	}
}
