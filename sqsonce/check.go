package sqsonce

import (
	"context"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// Check returns what is wrong with the store's set-up, or nil, when the
// store is a store.Checker (the DynamoDB table's schema and TTL, Redis's
// eviction policy). Call it in a deploy step or a test, not at a function's
// start-up: it costs calls and permissions the processor does without.
func (p *Processor) Check(ctx context.Context) error {
	if c, ok := p.lock.store.(store.Checker); ok {
		return c.Check(ctx)
	}
	return nil
}
