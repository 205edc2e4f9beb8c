package sqsoncetest_test

import (
	"testing"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/sqsoncetest"
)

// TestMemoryStore: the in-memory store passes the conformance suite, a
// fresh store for each rule.
func TestMemoryStore(t *testing.T) {
	sqsoncetest.TestStore(t, func(t *testing.T) sqsonce.Store { return sqsoncetest.NewStore() })
}

// TestMemoryStoreShared: the rules keep to ids of their own, so they pass
// on one store they all share, as they must on a shared table.
func TestMemoryStoreShared(t *testing.T) {
	shared := sqsoncetest.NewStore()
	sqsoncetest.TestStore(t, func(t *testing.T) sqsonce.Store { return shared })
}
