package store

import (
	"context"
	"errors"
	"fmt"
)

// Transactor is a Store whose completion can commit the work's own writes
// with it, in one transaction: exactly-once effects. sqsonce begins one
// transaction for each lock it takes (Begin), hands it to the work in its
// context (ContextWithTx; a store's package reads it back with TxFrom and
// gives the work its own kind of write: dynamostore.Add, pgstore.Tx), and
// seals it once the work has returned (Seal: no write is taken after
// that), then ends it with exactly one Commit (the work succeeded) or
// Rollback (it failed). A transaction the work added nothing to is never
// committed: the completion is then Store.Complete, as on a store without
// transactions, at the same cost.
//
// The transaction in a work's context is always its own lock's: the lock
// of a store without transactions gives its work a context with none, so
// that a Do nested in the work of another's never writes into the outer
// lock's transaction (which the outer work's failure would roll back
// after the inner key was completed).
type Transactor interface {
	Store
	// Begin returns the transaction of lease's work. It makes no call to
	// the store: a store that needs one (a database's BEGIN) makes it when
	// the work first asks for the transaction.
	Begin(lease Lease) Tx
}

// Tx is the transaction of one lease's work.
type Tx interface {
	// Seal ends the work's part of the transaction: sqsonce calls it as
	// soon as the work has returned (or is given up), before Empty, Commit
	// or Rollback. From then on the transaction takes no write: the
	// store's helper (dynamostore.Add, pgstore.Tx) refuses every one with
	// an error matching ErrTxEnded, so that a goroutine the work left
	// behind never has a write dropped with a nil error. A write taken
	// before Seal is the work's, committed or rolled back with it. Commit
	// and Rollback seal too; Seal may be called more than once.
	Seal()
	// Empty reports whether the work added nothing to the transaction.
	Empty() bool
	// Commit applies the work's writes and completes the lease's record as
	// Store.Complete does (COMPLETED until c.Until, the result and outbox
	// stored, the lock expiry removed), in one transaction: both or
	// neither. The
	// record's part is conditioned on the record still being the lease's
	// PROCESSING lock, owner and fence. It returns
	//   - nil once both are committed, an earlier attempt of this Commit
	//     whose answer was lost included (recognised by the record: the
	//     writes are never applied twice);
	//   - an error matching ErrLockLost when the record is no longer the
	//     lease's lock: nothing was applied;
	//   - an *EffectError when a condition of the work's own writes
	//     failed: nothing was applied, the lock is still the lease's;
	//   - an error matching ErrNotCommitted when nothing was applied and
	//     this transaction cannot be tried again (its connection is gone):
	//     the lock is still the lease's;
	//   - any other error when the outcome is not known: Commit may be
	//     called again, with the same arguments, and settles it.
	Commit(ctx context.Context, c Completion) error
	// Rollback discards the work's writes. The lock stays the lease's: the
	// caller releases it.
	Rollback(ctx context.Context) error
}

// ErrTxEnded: a write was given to a transaction that takes no more: its
// work has returned (the transaction is sealed, committing, committed or
// rolled back). The write is not applied.
var ErrTxEnded = errors.New("sqsonce: the work's transaction has ended (its work returned): the write is not applied; a goroutine of the work must finish before the work returns")

// ErrNotCommitted: a transaction's commit is known not to have applied
// anything, and cannot be tried again as it was: the work must run again.
var ErrNotCommitted = errors.New("sqsonce: transaction not committed")

// EffectError is a transaction refused for a condition of the work's own
// writes (a ConditionCheck or conditional Put of the handler's on
// DynamoDB; a deferred constraint on PostgreSQL): nothing was applied, and
// the failure is the work's, as if it had returned Err. Err is the store's
// detail: on DynamoDB a *types.TransactionCanceledException whose
// CancellationReasons name the write, with errors.As.
type EffectError struct {
	ID  string
	Err error
}

// Error describes the failure in one line.
func (e *EffectError) Error() string {
	return fmt.Sprintf("sqsonce: transaction of record %q refused by a condition of the work's own writes, nothing applied: %v", e.ID, e.Err)
}

// Unwrap returns the store's detail, for errors.As.
func (e *EffectError) Unwrap() error { return e.Err }

// txKey is the context key of the work's transaction.
type txKey struct{}

// ContextWithTx returns ctx carrying tx: sqsonce calls it on the work's
// context, and a test that calls a handler directly may too.
func ContextWithTx(ctx context.Context, tx Tx) context.Context {
	return context.WithValue(ctx, txKey{}, tx)
}

// TxFrom returns the transaction ctx carries, nil when it carries none
// (the store is no Transactor, or the work runs outside sqsonce).
func TxFrom(ctx context.Context) Tx {
	tx, _ := ctx.Value(txKey{}).(Tx)
	return tx
}
