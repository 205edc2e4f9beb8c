//go:build integration

package sqsonce

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// BenchmarkEmitOnDynamoDB is BenchmarkEmit on the DynamoDB store against
// moto_server, counting the DynamoDB calls on the client
// (lockCountingDynamo): the completion carries the messages in its own
// UpdateItem, marking them sent is one more.
//
//	go test -tags integration -run '^$' -bench '^BenchmarkEmitOnDynamoDB$' -benchmem ./sqsonce
func BenchmarkEmitOnDynamoDB(b *testing.B) {
	d := newLockDynamo(b)
	benchEmit(b, "dynamodb-calls/record", func(*testing.B) (store.Store, func() int64, func() time.Time) {
		calls := new(atomic.Int32)
		st := dynamostore.New(lockCountingDynamo{AdminAPI: d.api, calls: calls}, d.table)
		return st, func() int64 { return int64(calls.Load()) }, time.Now
	})
}
