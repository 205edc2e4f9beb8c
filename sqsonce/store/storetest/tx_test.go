package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/memstore"
)

// TestMemoryTransactions: the in-memory store passes the transactions'
// conformance suite, a fresh store for each rule.
func TestMemoryTransactions(t *testing.T) {
	TestTransactions(t, func(t *testing.T) (store.Transactor, Effects) {
		s := memstore.New()
		return s, memEffects{committed: s.Committed}
	})
}

// TestMemoryTransactionsShared: the rules keep to ids and counters of
// their own, so they pass on one store they all share.
func TestMemoryTransactionsShared(t *testing.T) {
	shared := memstore.New()
	TestTransactions(t, func(t *testing.T) (store.Transactor, Effects) {
		return shared, memEffects{committed: shared.Committed}
	})
}

// increment is the memory store's write of an Effects counter: one
// increment of the named counter once committed.
type increment struct{ name string }

// memEffects is Effects on memstore: an increment is a write added to the
// memstore.Tx (or a transaction wrapping one), counted among the
// committed writes; a refused write is a memstore.FailingCondition.
type memEffects struct {
	// committed is the store's Committed.
	committed func() map[string][]any
}

func (e memEffects) Add(_ context.Context, tx store.Tx, name string, refused bool) error {
	adder, ok := tx.(interface{ Add(write any) })
	if !ok {
		return fmt.Errorf("transaction %T is no memstore.Tx", tx)
	}
	if refused {
		adder.Add(memstore.FailingCondition{Err: errors.New("condition of " + name + " refused")})
		return nil
	}
	adder.Add(increment{name})
	return nil
}

func (e memEffects) Count(_ context.Context, name string) (int, error) {
	n := 0
	for _, writes := range e.committed() {
		for _, w := range writes {
			if w == (increment{name}) {
				n++
			}
		}
	}
	return n, nil
}
