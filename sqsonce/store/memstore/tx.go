package memstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// Tx is the store's transaction (store.Tx): it keeps the writes a work adds
// with Add, whatever their type, and Commit keeps them with the completion,
// where Committed shows them. dynamostore.Add stages its items in it, so a
// handler that writes to DynamoDB transactionally runs in a test on this
// store, with no AWS, and the test sees what it wrote and whether it
// committed.
type Tx struct {
	s     *Store
	lease store.Lease
	mu    sync.Mutex
	// writes are the work's, in the order added; sealed once the work
	// returned (Seal, Commit, Rollback): no write is taken after it; done
	// once committed or rolled back.
	writes []any
	sealed bool
	done   bool
}

// FailingCondition is a write whose condition fails at commit: Commit
// returns a *store.EffectError wrapping Err and applies nothing, as a
// database refuses a transaction for one of its conditions.
type FailingCondition struct {
	Err error
}

// Begin implements store.Transactor.
func (s *Store) Begin(lease store.Lease) store.Tx {
	return &Tx{s: s, lease: lease}
}

// Add adds a write to the transaction, or refuses it with an error
// matching store.ErrTxEnded once the transaction is sealed (its work has
// returned), as every store's transaction does.
func (t *Tx) Add(write any) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sealed {
		return fmt.Errorf("memstore: record %q: %w", t.lease.ID, store.ErrTxEnded)
	}
	t.writes = append(t.writes, write)
	return nil
}

// Seal implements store.Tx.
func (t *Tx) Seal() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sealed = true
}

// Writes returns the writes added so far, in order: a store's helper that
// stages its writes here (dynamostore.Add) checks its limits on them.
func (t *Tx) Writes() []any {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]any(nil), t.writes...)
}

// Empty implements store.Tx.
func (t *Tx) Empty() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.writes) == 0
}

// Commit implements store.Tx: under the store's lock, the record's
// condition (the lease's PROCESSING lock, owner and fence), then the
// writes' (a FailingCondition refuses), then both applied.
func (t *Tx) Commit(ctx context.Context, c store.Completion) error {
	if err := ctx.Err(); err != nil {
		return &store.StoreError{Op: "commit", ID: t.lease.ID, Err: err}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sealed = true
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.get(t.lease.ID)
	if t.done && ok && rec.Status == store.StatusCompleted && rec.Owner == t.lease.Owner && rec.Fence == t.lease.Fence {
		// A repeat of this commit, applied: recognised, not applied again.
		return nil
	}
	if !ok || rec.Owner != t.lease.Owner || rec.Fence != t.lease.Fence || rec.Status != store.StatusProcessing {
		return lost("commit", t.lease, rec, ok)
	}
	for _, w := range t.writes {
		if f, isFailing := w.(FailingCondition); isFailing {
			return &store.EffectError{ID: t.lease.ID, Err: f.Err}
		}
	}
	s.records[t.lease.ID] = completed(rec, c)
	s.committed[t.lease.ID] = append(s.committed[t.lease.ID], t.writes...)
	t.done = true
	return nil
}

// Rollback implements store.Tx.
func (t *Tx) Rollback(context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.writes, t.sealed, t.done = nil, true, true
	return nil
}

// Committed returns the writes of every committed transaction, by record
// id, in the order they were added: what a test of a transactional handler
// asserts on. A record's writes stay listed after TTL deletes the record.
func (s *Store) Committed() map[string][]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]any, len(s.committed))
	for id, w := range s.committed {
		out[id] = append([]any(nil), w...)
	}
	return out
}
