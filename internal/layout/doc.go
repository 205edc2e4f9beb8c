// Package layout checks what ships: the product module (the library and
// the Lambda functions) imports neither the operator CLI's module
// (cmd/sqs-once) nor the local harness's (local/), and its go.mod requires
// nothing only they need; the packages the Lambda functions and the CLI
// are built from leave out the machinery that only runs the product
// locally (internal/local, local/) and the benchmarks' fake endpoint;
// package sqsonce, and the smallest programs built on it alone (testdata),
// link none of the clients that only a Target needs; and nothing but
// sqsonce/store/redisstore links the Redis client, nothing but
// sqsonce/store/pgstore links pgx. It has tests only.
package layout
