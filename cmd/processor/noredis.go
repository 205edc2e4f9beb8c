//go:build !redis

package main

import "github.com/sqs-once/sqs-once/internal/storeenv"

// redisFromEnv is nil in the default build, which links no Redis client:
// storeenv.FromEnv refuses STORE=redis, saying how to build it in.
func redisFromEnv() storeenv.RedisFromEnv { return nil }
