package storetest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/memstore"
	"github.com/sqs-once/sqs-once/sqsonce/store/storetest"
)

// A store of your own proves itself with the conformance suite, from a test
// in its package. An Example cannot take a *testing.T, so this one only
// shows the test (it is compiled, not run); storetest's own
// TestMemoryStore is exactly this.
func ExampleTestStore() {
	// In mystore_test.go:
	TestMyStore := func(t *testing.T) {
		storetest.TestStore(t, func(t *testing.T) store.Store {
			// Your store: a fresh one, or one on a table the rules share.
			return memstore.New()
		})
	}
	_ = TestMyStore
}

// A store.Transactor proves its transactions with TestTransactions and an
// Effects of the store's own kind of write: here memstore's, whose
// transaction keeps any value as a write (a store on a database increments
// a counter row, with a conditional write for refused). Compiled, not run,
// as ExampleTestStore; storetest's own TestMemoryTransactions runs it.
func ExampleTestTransactions() {
	// In mystore_test.go:
	TestMyStoreTransactions := func(t *testing.T) {
		storetest.TestTransactions(t, func(t *testing.T) (store.Transactor, storetest.Effects) {
			s := memstore.New()
			return s, counters{s}
		})
	}
	_ = TestMyStoreTransactions
}

// counters is storetest.Effects on memstore: an increment is a write of
// its own type, added to the memstore.Tx; a refused write is a
// memstore.FailingCondition; Count counts the committed increments.
type counters struct{ s *memstore.Store }

type increment struct{ name string }

func (c counters) Add(_ context.Context, tx store.Tx, name string, refused bool) error {
	mtx, ok := tx.(*memstore.Tx)
	if !ok {
		return fmt.Errorf("transaction %T is no memstore.Tx", tx)
	}
	if refused {
		return mtx.Add(memstore.FailingCondition{Err: errors.New("refused: " + name)})
	}
	return mtx.Add(increment{name})
}

func (c counters) Count(_ context.Context, name string) (int, error) {
	n := 0
	for _, writes := range c.s.Committed() {
		for _, w := range writes {
			if w == (increment{name}) {
				n++
			}
		}
	}
	return n, nil
}
