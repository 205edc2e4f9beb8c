package sqsoncetest

import (
	"context"

	"github.com/sqs-once/sqs-once/internal/leasectx"
	"github.com/sqs-once/sqs-once/sqsonce/store/memstore"
)

// NewStore returns an empty in-memory store to hand to sqsonce.New as
// Config.Store: the DynamoDB store's semantics, with a clock the test
// controls (pass its Now as Config.Test.Now; Advance moves both).
func NewStore() *memstore.Store { return memstore.New() }

// Context returns ctx carrying key and fence as sqsonce.Key and
// sqsonce.Fence read them: for a Handler's own unit test, which calls the
// Handler directly, without a Processor.
func Context(ctx context.Context, key string, fence int64) context.Context {
	return leasectx.With(ctx, leasectx.Lease{Key: key, Fence: fence})
}
