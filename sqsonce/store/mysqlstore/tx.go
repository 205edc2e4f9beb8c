package mysqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"

	"github.com/go-sql-driver/mysql"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// ErrNoTx is Tx's error for a context that carries no transaction of a
// mysqlstore.Store: the work does not run under sqsonce on this store.
var ErrNoTx = errors.New("mysqlstore: the context carries no transaction of a mysqlstore.Store (the work does not run under sqsonce on a mysqlstore.Store)")

// Tx returns the transaction of the work ctx belongs to, on the store's
// *sql.DB: the work's writes through it commit with the record's
// completion, in one transaction, or not at all. The first call begins it
// (and takes a connection from the pool until the work ends); the next
// return the same one: a work that never calls Tx costs what it costs on
// a store without transactions, and holds no connection. Tx is BeginTx
// with the server's defaults (REPEATABLE READ on MySQL and MariaDB,
// unless the server's transaction_isolation says otherwise).
//
// sqsonce commits and rolls back the transaction: the work never calls
// the *sql.Tx's Commit or Rollback (a deferred tx.Rollback() included),
// and fails by returning an error. A work that ended the transaction
// itself commits nothing through sqsonce (its Commit is refused, the key
// runs again), and one that committed it applied its writes without the
// completion, which a new delivery then applies again.
//
// A statement of the work's that fails (a duplicate key, a foreign key, a
// deadlock) refuses the whole transaction, as PostgreSQL's aborted
// transaction does, even if the work went on: MySQL rolls back only the
// failed statement (and a deadlock the whole transaction, after which
// the next statements would begin another), so a work that carried on
// would commit part of its writes. The work returns the error; where a
// duplicate is expected, write INSERT … ON DUPLICATE KEY UPDATE or INSERT
// IGNORE, which do not fail. The store tells a failed statement by the
// session's Handler_rollback, which it reads when the transaction begins
// and before the completion.
//
// Once the work has returned, Tx fails with an error matching
// store.ErrTxEnded. A *sql.Tx is database/sql's own type, which the store
// cannot guard as pgstore guards its pgx.Tx: a goroutine the work left
// behind, writing through the *sql.Tx it was given before, would join the
// commit if it wrote before the completion and get sql.ErrTxDone after
// it. Finish the work's goroutines before it returns.
//
// The business tables must be in the same database server as the store's
// table (another database of it is fine: MySQL's transactions span them).
// Tx returns ErrNoTx when ctx carries no transaction of a
// mysqlstore.Store.
func Tx(ctx context.Context) (*sql.Tx, error) {
	t, ok := store.TxFrom(ctx).(*transaction)
	if !ok {
		return nil, ErrNoTx
	}
	return t.begin(ctx, nil)
}

// BeginTx is Tx with the options the transaction begins with, as
// database/sql's BeginTx takes them: the isolation level, and ReadOnly
// (which the completion's UPDATE refuses: never for a work that
// completes). The first call of BeginTx or Tx begins the transaction; a
// later BeginTx with other options fails (the transaction has begun with
// the first ones), a later Tx returns it as it is.
//
// The completion is an UPDATE of the record's row in the work's
// transaction, conditioned on the lease's owner, fence and PROCESSING.
// InnoDB evaluates an UPDATE's condition on the row's latest committed
// version (a locking read) at every level: a takeover committed at any
// time before it is seen, and the completion matches no row. A renewal of
// the lock while the work runs does not conflict with it either (unlike
// PostgreSQL's REPEATABLE READ): every level completes. The level is what
// the work's own reads see: REPEATABLE READ (the default) one snapshot
// from the work's first read; READ COMMITTED each statement's; SERIALIZABLE
// locks what it reads, and a deadlock with a concurrent transaction
// refuses the commit (nothing applied, the key runs again).
func BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error) {
	t, ok := store.TxFrom(ctx).(*transaction)
	if !ok {
		return nil, ErrNoTx
	}
	var o sql.TxOptions
	if opts != nil {
		o = *opts
	}
	return t.begin(ctx, &o)
}

// transaction is the store.Tx of one lease's work.
type transaction struct {
	s     *Store
	lease store.Lease

	// mu guards the fields below.
	mu    sync.Mutex
	conn  *sql.Conn // the transaction's connection, held until it ends
	tx    *sql.Tx   // nil until the work asks for it
	opts  sql.TxOptions
	state txState
	// rollbacks is the session's Handler_rollback when the transaction
	// began: a failed statement of the work's moves it on.
	rollbacks int64
	// sealed once the work returned (Seal, Commit, Rollback): Tx refuses
	// from then on.
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
	return fmt.Errorf("mysqlstore: record %q: %w", t.lease.ID, store.ErrTxEnded)
}

// begin returns the work's transaction, beginning it (with *opts, or the
// defaults when nil) on the first call.
func (t *transaction) begin(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sealed || t.state != txOpen {
		return nil, t.ended()
	}
	if t.tx == nil {
		var o sql.TxOptions
		if opts != nil {
			o = *opts
		}
		// The transaction outlives the context of the work's first call
		// (a handler's sub-context): sqsonce ends it. It runs on a
		// connection of its own (db.Conn), which the store keeps until it
		// has set the session back (release).
		bg := context.WithoutCancel(ctx)
		conn, err := t.s.db.Conn(bg)
		if err != nil {
			return nil, t.s.fail("begin", t.lease.ID, err)
		}
		tx, err := conn.BeginTx(bg, &o)
		if err != nil {
			conn.Close()
			return nil, t.s.fail("begin", t.lease.ID, err)
		}
		t.conn = conn
		// A deadlock (1213) rolls the whole transaction back, and MySQL
		// then runs the next statements one by one, each committed at
		// once: a work that carried on after it would apply its later
		// writes outside the completion. With autocommit off they open a
		// new transaction instead, which the store rolls back when it
		// finds the failed statement (Handler_rollback). Set inside the
		// transaction, it commits nothing.
		_, err = tx.ExecContext(ctx, `SET SESSION autocommit = 0`)
		var n int64
		if err == nil {
			n, err = handlerRollbacks(ctx, tx)
		}
		if err != nil {
			_ = tx.Rollback()
			t.release(ctx)
			return nil, t.s.fail("begin", t.lease.ID, err)
		}
		t.tx, t.opts, t.rollbacks = tx, o, n
	} else if opts != nil && *opts != t.opts {
		return nil, fmt.Errorf("mysqlstore.BeginTx: record %q: the work's transaction has begun with options %+v, not %+v: pass the same options on every call, or call Tx for the transaction as it is", t.lease.ID, t.opts, *opts)
	}
	return t.tx, nil
}

// handlerRollbacks is the session's count of statements and transactions
// the server rolled back (Handler_rollback), on tx's connection.
func handlerRollbacks(ctx context.Context, tx *sql.Tx) (int64, error) {
	var name string
	var n int64
	err := tx.QueryRowContext(ctx, `SHOW SESSION STATUS LIKE 'Handler_rollback'`).Scan(&name, &n)
	return n, err
}

// Seal implements store.Tx.
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

// Commit implements store.Tx: in the work's transaction, a check that no
// statement of the work's failed (Handler_rollback as it began, else a
// *store.EffectError), the completion (an UPDATE of the lease's own
// PROCESSING lock, owner and fence, writing c's window, result and
// outbox, that must match one row, else the transaction is rolled back:
// ErrLockLost), then COMMIT. A COMMIT whose answer is lost is settled by
// reading the record on the pool (waiting for a transaction that still
// holds it): COMPLETED by this lease is nil, still this lease's lock is
// store.ErrNotCommitted, anything else ErrLockLost; a read that fails
// leaves it unsettled, and the next Commit reads again. A completion or
// COMMIT refused for a constraint (1062, 1452, 3819, …) is a
// *store.EffectError wrapping the *mysql.MySQLError; a deadlock or lock
// wait timeout (1213, 1205) is store.ErrNotCommitted.
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
	n, err := handlerRollbacks(ctx, t.tx)
	if err != nil {
		return t.notApplied(ctx, err)
	}
	if n != t.rollbacks && !t.s.trustStatements {
		t.end(ctx)
		return &store.EffectError{ID: t.lease.ID, Err: fmt.Errorf("a statement of the work failed and the server rolled it back (the session's Handler_rollback went from %d to %d): the transaction is refused as a whole, as the work's error", t.rollbacks, n)}
	}
	res, err := t.tx.ExecContext(ctx, t.s.q.completeTx, c.Until.Unix(), c.Result, c.Outbox, t.lease.ID, t.lease.Owner, t.lease.Fence)
	if err != nil {
		return t.notApplied(ctx, err)
	}
	affected, err := res.RowsAffected()
	if err != nil {
		return t.notApplied(ctx, err)
	}
	if affected != 1 {
		t.end(ctx)
		return t.lost(ctx)
	}
	err = t.tx.Commit()
	t.release(ctx)
	if err == nil {
		t.state = txCommitted
		return nil
	}
	var my *mysql.MySQLError
	switch {
	case errors.As(err, &my):
		// The server refused the COMMIT and said so: rolled back.
		t.state = txEnded
		if effect(my.Number) {
			return &store.EffectError{ID: t.lease.ID, Err: err}
		}
		return fmt.Errorf("commit %q: %w: %w", t.lease.ID, store.ErrNotCommitted, t.s.fail("commit", t.lease.ID, err))
	case errors.Is(err, sql.ErrTxDone):
		t.state = txEnded
		return fmt.Errorf("commit %q: %w: the work's transaction was ended before sqsonce committed it (the work must not call its Commit or Rollback): %w", t.lease.ID, store.ErrNotCommitted, err)
	}
	// The answer is lost (driver.ErrBadConn, mysql.ErrInvalidConn, an I/O
	// error): the COMMIT may have applied. The record tells.
	t.state = txUnsettled
	return t.settle(ctx)
}

// notApplied is a statement before the COMMIT that failed: no COMMIT was
// sent, so nothing is applied, whatever the error. The transaction is
// rolled back.
func (t *transaction) notApplied(ctx context.Context, err error) error {
	t.end(ctx)
	n := code(err)
	switch {
	case effect(n):
		return &store.EffectError{ID: t.lease.ID, Err: err}
	case errors.Is(err, sql.ErrTxDone):
		return fmt.Errorf("commit %q: %w: the work's transaction was ended before sqsonce committed it (the work must not call its Commit or Rollback): %w", t.lease.ID, store.ErrNotCommitted, err)
	}
	return fmt.Errorf("commit %q: %w: %w", t.lease.ID, store.ErrNotCommitted, t.s.fail("commit", t.lease.ID, err))
}

// end rolls the transaction back, its outcome known: nothing applied.
func (t *transaction) end(ctx context.Context) {
	t.state = txEnded
	_ = t.tx.Rollback() // a connection gone has rolled it back already
	t.release(ctx)
}

// release gives the transaction's connection back to the pool, its
// session's autocommit on again, once the transaction has ended; a
// connection whose session could not be set back is closed instead, so
// that no other statement of the pool's runs without autocommit.
func (t *transaction) release(ctx context.Context) {
	if t.conn == nil {
		return
	}
	if _, err := t.conn.ExecContext(context.WithoutCancel(ctx), `SET SESSION autocommit = 1`); err != nil {
		_ = t.conn.Raw(func(any) error { return driver.ErrBadConn }) // closes it
	}
	t.conn.Close()
	t.conn = nil
}

// settle reads the record after a COMMIT whose answer was lost. LOCK IN
// SHARE MODE waits for a transaction still holding the record, the COMMIT
// itself if the server is still applying it.
func (t *transaction) settle(ctx context.Context) error {
	var r row
	err := t.s.db.QueryRowContext(ctx, t.s.q.settle, t.lease.ID).Scan(r.dest()...)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
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
	r, _ := t.s.current(ctx, "commit", t.lease.ID)
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
	err := t.tx.Rollback()
	t.release(ctx)
	if err != nil && !errors.Is(err, sql.ErrTxDone) {
		return t.s.fail("rollback", t.lease.ID, err)
	}
	return nil
}
