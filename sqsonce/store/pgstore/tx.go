package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// ErrNoTx is Tx's error for a context that carries no transaction of a
// pgstore.Store: the work does not run under sqsonce on this store.
var ErrNoTx = errors.New("pgstore: the context carries no transaction of a pgstore.Store (the work does not run under sqsonce on a pgstore.Store)")

// Tx returns the transaction of the work ctx belongs to, on the store's
// pool: the work's writes through it commit with the record's completion,
// in one transaction, or not at all. The first call begins it (and takes a
// connection from the pool until the work ends); the next return the same
// one: a work that never calls Tx costs what it costs on a store without
// transactions, and holds no connection. sqsonce commits and rolls back
// the transaction: its Commit returns an error and its Rollback does
// nothing (so that `defer tx.Rollback(ctx)` stays harmless); the work
// fails by returning an error. Savepoints (the pgx.Tx's Begin) work as
// usual.
//
// The business tables must be in the same database as the store's table.
// Tx returns ErrNoTx when ctx carries no transaction of a pgstore.Store.
func Tx(ctx context.Context) (pgx.Tx, error) {
	t, ok := store.TxFrom(ctx).(*transaction)
	if !ok {
		return nil, ErrNoTx
	}
	return t.begin(ctx)
}

// transaction is the store.Tx of one lease's work.
type transaction struct {
	s     *Store
	lease store.Lease

	mu    sync.Mutex
	tx    pgx.Tx // nil until the work asks for it
	state txState
}

type txState int

const (
	txOpen      txState = iota
	txCommitted         // both applied
	txUnsettled         // COMMIT sent, its answer lost: the record decides
	txEnded             // rolled back, or known not committed
)

// Begin implements store.Transactor. It makes no call: Tx begins the
// transaction when the work first asks for it.
func (s *Store) Begin(lease store.Lease) store.Tx {
	return &transaction{s: s, lease: lease}
}

func (t *transaction) begin(ctx context.Context) (pgx.Tx, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state != txOpen {
		return nil, fmt.Errorf("pgstore: the transaction of record %q has ended", t.lease.ID)
	}
	if t.tx == nil {
		tx, err := t.s.pool.Begin(ctx)
		if err != nil {
			return nil, t.s.fail("begin", t.lease.ID, err)
		}
		t.tx = tx
	}
	return workTx{t.tx}, nil
}

// workTx is the work's view of the transaction: sqsonce ends it.
type workTx struct{ pgx.Tx }

// Commit refuses: sqsonce commits the transaction with the completion.
func (workTx) Commit(context.Context) error {
	return errors.New("pgstore: the work's transaction is committed by sqsonce, with the record's completion, once the work returns nil")
}

// Rollback does nothing: sqsonce rolls the transaction back when the work
// returns an error.
func (workTx) Rollback(context.Context) error { return nil }

// Empty implements store.Tx: true until the work called Tx.
func (t *transaction) Empty() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tx == nil
}

// Commit implements store.Tx: in the work's transaction, the completion
// (an UPDATE of the lease's own PROCESSING lock, owner and fence, that
// must touch one row, else the transaction is rolled back: ErrLockLost),
// then COMMIT. A COMMIT whose answer is lost is settled by reading the
// record on the pool (waiting for a transaction that still holds it):
// COMPLETED by this lease is nil, still this lease's lock is
// store.ErrNotCommitted, anything else ErrLockLost; a read that fails
// leaves it unsettled, and the next Commit reads again. A COMMIT refused
// for an integrity constraint (class 23, a deferred constraint of the
// work's tables) is a *store.EffectError wrapping the *pgconn.PgError, as
// is a work whose own statement failed earlier (25P02: the transaction was
// aborted); a serialization failure or deadlock (40001, 40P01) is
// store.ErrNotCommitted.
func (t *transaction) Commit(ctx context.Context, until time.Time, result []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch t.state {
	case txCommitted:
		return nil
	case txUnsettled:
		return t.settle(ctx)
	case txEnded:
		return fmt.Errorf("commit %q: %w (the transaction has ended)", t.lease.ID, store.ErrNotCommitted)
	}
	if t.tx == nil {
		// Nothing of the work's: the completion alone.
		if err := t.s.Complete(ctx, t.lease, until, result); err != nil {
			return err
		}
		t.state = txCommitted
		return nil
	}
	tag, err := t.tx.Exec(ctx, t.s.q.completeTx, t.lease.ID, t.lease.Owner, t.lease.Fence, until.Unix(), result)
	if err != nil {
		// No COMMIT was sent: nothing is applied, whatever the error.
		t.end(ctx)
		var pg *pgconn.PgError
		if errors.As(err, &pg) && pg.Code == "25P02" {
			return &store.EffectError{ID: t.lease.ID, Err: fmt.Errorf("a statement of the work failed and aborted its transaction: %w", err)}
		}
		return fmt.Errorf("commit %q: %w: %w", t.lease.ID, store.ErrNotCommitted, t.s.fail("commit", t.lease.ID, err))
	}
	if tag.RowsAffected() != 1 {
		t.end(ctx)
		return t.lost(ctx)
	}
	err = t.tx.Commit(ctx)
	if err == nil {
		t.state = txCommitted
		return nil
	}
	var pg *pgconn.PgError
	switch {
	case errors.As(err, &pg) && pg.Severity == "ERROR":
		// The server refused the COMMIT and said so: rolled back.
		t.state = txEnded
		switch {
		case pg.Code[:2] == "23":
			return &store.EffectError{ID: t.lease.ID, Err: err}
		}
		return fmt.Errorf("commit %q: %w: %w", t.lease.ID, store.ErrNotCommitted, t.s.fail("commit", t.lease.ID, err))
	case errors.Is(err, pgx.ErrTxCommitRollback):
		t.state = txEnded
		return fmt.Errorf("commit %q: %w: %w", t.lease.ID, store.ErrNotCommitted, err)
	}
	// The answer is lost (the connection gone, a FATAL that may follow a
	// commit): the record tells.
	t.state = txUnsettled
	return t.settle(ctx)
}

// end rolls the transaction back, its outcome known: nothing applied.
func (t *transaction) end(ctx context.Context) {
	t.state = txEnded
	_ = t.tx.Rollback(ctx) // a connection gone has rolled it back already
}

// settle reads the record after a COMMIT whose answer was lost. FOR SHARE
// waits for a transaction still holding the record, the COMMIT itself if
// it is still being applied.
func (t *transaction) settle(ctx context.Context) error {
	var r row
	err := t.s.pool.QueryRow(ctx, t.s.q.settle, t.lease.ID).Scan(r.dest()...)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return t.s.fail("commit", t.lease.ID, fmt.Errorf("the answer to COMMIT was lost and the record could not be read to settle it: %w", err))
	}
	if r.exists() && *r.owner == t.lease.Owner && *r.fence == t.lease.Fence {
		switch store.Status(*r.status) {
		case store.StatusCompleted:
			t.state = txCommitted
			return nil
		case store.StatusProcessing:
			t.state = txEnded
			return fmt.Errorf("commit %q: %w (the answer to COMMIT was lost, and the record is still the lease's lock)", t.lease.ID, store.ErrNotCommitted)
		}
	}
	t.state = txEnded
	return lost("commit", t.lease.ID, r)
}

// lost is the completion's refusal in the transaction: the record read on
// the pool, for the message.
func (t *transaction) lost(ctx context.Context) error {
	var r row
	_ = t.s.pool.QueryRow(ctx, t.s.q.settle, t.lease.ID).Scan(r.dest()...)
	return lost("commit", t.lease.ID, r)
}

// Rollback implements store.Tx.
func (t *transaction) Rollback(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state != txOpen {
		return nil
	}
	t.state = txEnded
	if t.tx == nil {
		return nil
	}
	if err := t.tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return t.s.fail("rollback", t.lease.ID, err)
	}
	return nil
}
