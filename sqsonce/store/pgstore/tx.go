package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

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
// usual. Tx is BeginTx with PostgreSQL's defaults (READ COMMITTED, or
// the server's default_transaction_isolation).
//
// Once the work has returned, the transaction takes nothing more: Tx, and
// every statement through a pgx.Tx it returned (or a savepoint of it),
// fails with an error matching store.ErrTxEnded, so that a goroutine the
// work left behind learns that its write is not applied. A statement
// under way when the work returns is the work's: the commit waits for it.
// Rows of a Query must be closed before the work returns (pgx holds the
// connection until then, and the commit would find it busy: nothing is
// applied and the key runs again).
//
// The business tables must be in the same database as the store's table.
// Tx returns ErrNoTx when ctx carries no transaction of a pgstore.Store.
func Tx(ctx context.Context) (pgx.Tx, error) {
	t, ok := store.TxFrom(ctx).(*transaction)
	if !ok {
		return nil, ErrNoTx
	}
	return t.begin(ctx, nil)
}

// BeginTx is Tx with the options the transaction begins with, as pgx's
// BeginTx takes them: the isolation level, READ ONLY (which the
// completion's UPDATE refuses: never for a work that completes), and
// DEFERRABLE. The first call of BeginTx or Tx begins the transaction;
// a later BeginTx with other options fails (the transaction has begun
// with the first ones), a later Tx returns it as it is.
//
// What the level means for the completion, which is an UPDATE of the
// record's row in the work's transaction, conditioned on the lease's
// owner, fence and PROCESSING:
//
//   - ReadCommitted (the default): the UPDATE reads the row's latest
//     committed version, so the condition sees a takeover committed at
//     any time before it; the work's own statements see each other
//     statement's snapshot.
//   - RepeatableRead and Serializable: the work reads one snapshot, taken
//     at its first statement. A row changed by another transaction after
//     that snapshot cannot be updated by this one (SQLSTATE 40001): the
//     record's own row is changed by every renewal of the lock, so a
//     renewal (Config.LockTimeout, or a context without a deadline)
//     between the work's first statement and the completion makes the
//     completion fail, nothing applied, and the key runs again. Use them
//     where the lock is not renewed while the work runs: under a Lambda
//     invocation's deadline with LockTimeout zero, or with a LockTimeout
//     longer than the work. A takeover is refused the same way, as it
//     must be. Serializable also refuses a commit that conflicts with a
//     concurrent transaction's reads (40001): not committed, run again.
func BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	t, ok := store.TxFrom(ctx).(*transaction)
	if !ok {
		return nil, ErrNoTx
	}
	return t.begin(ctx, &opts)
}

// transaction is the store.Tx of one lease's work.
type transaction struct {
	s     *Store
	lease store.Lease

	// mu guards the fields below, and is held for the whole of each of
	// the work's statements and of Commit, so that none runs on the
	// connection while another does.
	mu    sync.Mutex
	tx    pgx.Tx // nil until the work asks for it
	opts  pgx.TxOptions
	state txState
	// sealed once the work returned (Seal, Commit, Rollback): no statement
	// of the work's is run after it.
	sealed bool
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

// ended is the refusal of a write after the work returned.
func (t *transaction) ended() error {
	return fmt.Errorf("pgstore: record %q: %w", t.lease.ID, store.ErrTxEnded)
}

// begin returns the work's transaction, beginning it (with *opts, or the
// defaults when nil) on the first call.
func (t *transaction) begin(ctx context.Context, opts *pgx.TxOptions) (pgx.Tx, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sealed || t.state != txOpen {
		return nil, t.ended()
	}
	if t.tx == nil {
		var o pgx.TxOptions
		if opts != nil {
			o = *opts
		}
		tx, err := t.s.pool.BeginTx(ctx, o)
		if err != nil {
			return nil, t.s.fail("begin", t.lease.ID, err)
		}
		t.tx, t.opts = tx, o
	} else if opts != nil && *opts != t.opts {
		return nil, fmt.Errorf("pgstore.BeginTx: record %q: the work's transaction has begun with options %+v, not %+v: pass the same options on every call, or call Tx for the transaction as it is", t.lease.ID, t.opts, *opts)
	}
	return workTx{guardedTx{Tx: t.tx, t: t}}, nil
}

// guardedTx runs the work's statements while the transaction takes them:
// after the work returned each fails with store.ErrTxEnded instead of
// joining (or missing) the commit. A savepoint of it is guarded too.
type guardedTx struct {
	pgx.Tx
	t *transaction
}

// use runs fn under the transaction's lock unless the work has returned.
func (g guardedTx) use(fn func() error) error {
	g.t.mu.Lock()
	defer g.t.mu.Unlock()
	if g.t.sealed {
		return g.t.ended()
	}
	return fn()
}

// Begin starts a savepoint, guarded as the transaction is.
func (g guardedTx) Begin(ctx context.Context) (pgx.Tx, error) {
	var sp pgx.Tx
	err := g.use(func() error {
		var err error
		sp, err = g.Tx.Begin(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return guardedTx{Tx: sp, t: g.t}, nil
}

// Commit releases a savepoint (the work's transaction itself refuses: see
// workTx).
func (g guardedTx) Commit(ctx context.Context) error {
	return g.use(func() error { return g.Tx.Commit(ctx) })
}

// Rollback rolls a savepoint back; after the work returned it does
// nothing, as sqsonce ends the transaction.
func (g guardedTx) Rollback(ctx context.Context) error {
	err := g.use(func() error { return g.Tx.Rollback(ctx) })
	if errors.Is(err, store.ErrTxEnded) {
		return nil
	}
	return err
}

// Exec runs sql in the transaction, or refuses once the work returned.
func (g guardedTx) Exec(ctx context.Context, sql string, args ...any) (tag pgconn.CommandTag, err error) {
	err = g.use(func() error {
		tag, err = g.Tx.Exec(ctx, sql, args...)
		return err
	})
	return tag, err
}

// Query runs sql in the transaction, or refuses once the work returned.
// Its rows are read after the lock is let go: close them before the work
// returns.
func (g guardedTx) Query(ctx context.Context, sql string, args ...any) (rows pgx.Rows, err error) {
	err = g.use(func() error {
		rows, err = g.Tx.Query(ctx, sql, args...)
		return err
	})
	return rows, err
}

// QueryRow runs sql in the transaction, or refuses once the work
// returned: the refusal is Scan's error.
func (g guardedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	var row pgx.Row
	if err := g.use(func() error {
		row = g.Tx.QueryRow(ctx, sql, args...)
		return nil
	}); err != nil {
		return errRow{err}
	}
	return row
}

// SendBatch sends b in the transaction, or refuses once the work
// returned (the refusal is every result's error). Close the results
// before the work returns.
func (g guardedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	var br pgx.BatchResults
	if err := g.use(func() error {
		br = g.Tx.SendBatch(ctx, b)
		return nil
	}); err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	return br
}

// CopyFrom copies rows in the transaction, or refuses once the work
// returned.
func (g guardedTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (n int64, err error) {
	err = g.use(func() error {
		n, err = g.Tx.CopyFrom(ctx, table, columns, src)
		return err
	})
	return n, err
}

// Prepare prepares sql on the transaction's connection, or refuses once
// the work returned.
func (g guardedTx) Prepare(ctx context.Context, name, sql string) (d *pgconn.StatementDescription, err error) {
	err = g.use(func() error {
		d, err = g.Tx.Prepare(ctx, name, sql)
		return err
	})
	return d, err
}

// errRow is a pgx.Row whose Scan returns err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// workTx is the work's view of the transaction: sqsonce ends it.
type workTx struct{ guardedTx }

// Commit refuses: sqsonce commits the transaction with the completion.
func (workTx) Commit(context.Context) error {
	return errors.New("pgstore: the work's transaction is committed by sqsonce, with the record's completion, once the work returns nil")
}

// Rollback does nothing: sqsonce rolls the transaction back when the work
// returns an error.
func (workTx) Rollback(context.Context) error { return nil }

// Seal implements store.Tx. It waits for a statement of the work's under
// way.
func (t *transaction) Seal() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sealed = true
}

// Empty implements store.Tx: true until the work called Tx.
func (t *transaction) Empty() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tx == nil
}

// Commit implements store.Tx: in the work's transaction, the completion
// (an UPDATE of the lease's own PROCESSING lock, owner and fence, writing
// c's window, result and outbox, that must touch one row, else the
// transaction is rolled back: ErrLockLost), then COMMIT. A COMMIT whose answer is lost is settled by reading the
// record on the pool (waiting for a transaction that still holds it):
// COMPLETED by this lease is nil, still this lease's lock is
// store.ErrNotCommitted, anything else ErrLockLost; a read that fails
// leaves it unsettled, and the next Commit reads again. A COMMIT refused
// for an integrity constraint (class 23, a deferred constraint of the
// work's tables) is a *store.EffectError wrapping the *pgconn.PgError, as
// is a work whose own statement failed earlier (25P02: the transaction was
// aborted); a serialization failure or deadlock (40001, 40P01) is
// store.ErrNotCommitted.
func (t *transaction) Commit(ctx context.Context, c store.Completion) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sealed = true
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
		if err := t.s.Complete(ctx, t.lease, c); err != nil {
			return err
		}
		t.state = txCommitted
		return nil
	}
	tag, err := t.tx.Exec(ctx, t.s.q.completeTx, t.lease.ID, t.lease.Owner, t.lease.Fence, c.Until.Unix(), c.Result, c.Outbox)
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
	t.sealed = true
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
