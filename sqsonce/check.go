package sqsonce

import (
	"context"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// Check reads the store's set-up once and returns an error that says what
// is wrong with it, or nil: it calls the store's Check when the store is a
// store.Checker (the DynamoDB store checks its table's schema and TTL, the
// Redis store its server's eviction policy; see theirs), and returns nil
// for a store that is not one. Call it in a deploy step, a smoke test or an
// operator's tool, not at a Lambda function's start-up, where it would add
// calls to every cold start and need permissions the processor otherwise
// does without.
func (p *Processor) Check(ctx context.Context) error {
	if c, ok := p.lock.store.(store.Checker); ok {
		return c.Check(ctx)
	}
	return nil
}
