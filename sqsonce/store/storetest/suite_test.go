package storetest_test

import (
	"testing"

	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/memstore"
	"github.com/sqs-once/sqs-once/sqsonce/store/storetest"
)

// TestMemoryStore: the in-memory store passes the conformance suite, a
// fresh store for each rule.
func TestMemoryStore(t *testing.T) {
	storetest.TestStore(t, func(t *testing.T) store.Store { return memstore.New() })
}

// TestMemoryStoreShared: the rules keep to ids of their own, so they pass
// on one store they all share, as they must on a shared table.
func TestMemoryStoreShared(t *testing.T) {
	shared := memstore.New()
	storetest.TestStore(t, func(t *testing.T) store.Store { return shared })
}

// TestMemoryTransactions: the in-memory store passes the transactions'
// conformance suite, a fresh store for each rule, with the Effects of
// ExampleTestTransactions.
func TestMemoryTransactions(t *testing.T) {
	storetest.TestTransactions(t, func(t *testing.T) (store.Transactor, storetest.Effects) {
		s := memstore.New()
		return s, counters{s}
	})
}

// TestMemoryTransactionsShared: the rules keep to ids and counters of
// their own, so they pass on one store they all share.
func TestMemoryTransactionsShared(t *testing.T) {
	shared := memstore.New()
	storetest.TestTransactions(t, func(t *testing.T) (store.Transactor, storetest.Effects) {
		return shared, counters{shared}
	})
}
