// Package storeenv is the processor's choice of store from the environment:
// STORE=dynamodb (the default: the table IDEMPOTENCY_TABLE names) or
// STORE=redis (sqsonce/store/redisstore, REDIS_URL and the variables
// docs/redis.md lists). The Redis store is compiled in only with the build
// tag redis, so the default processor links no Redis client (its size and
// start-up time are the DynamoDB processor's); without the tag, STORE=redis
// is an error that says how to build it.
package storeenv
