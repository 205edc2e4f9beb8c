//go:build integration

package mysqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// hookedDB opens the test server's database through a connector that
// calls before with the text of each statement the store executes on it
// (interpolateParams: every statement is one ExecContext or QueryContext
// of the connection, none prepared), so that a test can run another
// client's writes at an exact point of a store's operation, the
// interleaving that a real race leaves to chance.
func hookedDB(t testing.TB, before func(query string)) *sql.DB {
	return hookedEndDB(t, before, nil)
}

// hookedEndDB is hookedDB whose transactions' COMMIT and ROLLBACK run
// through end (nil: as they are), which may change the answer the store
// gets.
func hookedEndDB(t testing.TB, before func(query string), end func(op string, do func() error) error) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.InterpolateParams = true
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(hookConnector{Connector: c, before: before, end: end})
	t.Cleanup(func() { db.Close() })
	return db
}

type hookConnector struct {
	driver.Connector
	before func(string)
	end    func(op string, do func() error) error
}

func (c hookConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return hookConn{Conn: conn, before: c.before, end: c.end}, nil
}

type hookConn struct {
	driver.Conn
	before func(string)
	end    func(op string, do func() error) error
}

func (c hookConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	c.before(q)
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (c hookConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	c.before(q)
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (c hookConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return hookTx{Tx: tx, end: c.end}, nil
}

// hookTx runs a transaction's COMMIT and ROLLBACK through end (op is
// "COMMIT" or "ROLLBACK"; do runs it), which may change the answer, or
// answer without running it (a nil end: as they are).
type hookTx struct {
	driver.Tx
	end func(op string, do func() error) error
}

func (t hookTx) Commit() error {
	if t.end == nil {
		return t.Tx.Commit()
	}
	return t.end("COMMIT", t.Tx.Commit)
}

func (t hookTx) Rollback() error {
	if t.end == nil {
		return t.Tx.Rollback()
	}
	return t.end("ROLLBACK", t.Tx.Rollback)
}

func (c hookConn) CheckNamedValue(v *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(v)
}

func (c hookConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

// TestAcquireTakeoverIsNotFooledByARecordCreatedAgain: Acquire reads an
// expired lock and replaces it with a compare-and-set on the row's
// version; if, between its read and its write, the record is deleted
// (Sweep, past its retention) and created again by another holder's
// Acquire, the new row starts at the same version (0), and a
// compare-and-set on the version alone replaces that other holder's live
// lock: two holders run the key's work, and the fence moves backwards.
func TestAcquireTakeoverIsNotFooledByARecordCreatedAgain(t *testing.T) {
	plain := newDB(t, plainParams)
	other := newTable(t, plain, "review_aba")
	ctx := t.Context()
	t0 := time.UnixMilli(1_800_000_000_000)
	id := "p#k"
	// An old lock, never renewed (version 0), long expired: past its
	// retention, so that Sweep deletes it.
	if _, err := other.Acquire(ctx, store.AcquireRequest{ID: id, Owner: "old", Now: t0, LockUntil: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(2 * time.Hour)
	var once sync.Once
	var b store.Lease
	var bErr error
	db := hookedDB(t, func(q string) {
		if !strings.Contains(q, "version = version + 1 WHERE id") {
			return
		}
		// A has read the old lock and is about to replace it: the sweep
		// deletes it, and B acquires the key anew.
		once.Do(func() {
			if _, err := other.Sweep(ctx, now, 10); err != nil {
				bErr = err
				return
			}
			b, bErr = other.Acquire(ctx, store.AcquireRequest{ID: id, Owner: "B", Now: now, LockUntil: now.Add(time.Minute)})
		})
	})
	a := New(db, "review_aba")
	la, errA := a.Acquire(ctx, store.AcquireRequest{ID: id, Owner: "A", Now: now, LockUntil: now.Add(time.Minute)})
	if bErr != nil {
		t.Fatalf("B's acquisition: %v", bErr)
	}
	if errA == nil {
		t.Errorf("A acquired (fence %d) over B's live lock (fence %d): two holders of the key", la.Fence, b.Fence)
	} else if !errors.Is(errA, store.ErrInProgress) {
		t.Errorf("A: %v; want ErrInProgress (B's live lock)", errA)
	}
	rec, err := other.Read(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Owner != "B" || rec.Fence != b.Fence {
		t.Errorf("the record is %s; want B's lock, fence %d", rec, b.Fence)
	}
}

// TestAcquireRacingInsertsAfterADeleteAreNotUnavailable: acquisitions of
// one key that wait on a record being deleted (Sweep, Forget, in a
// transaction that has not committed yet) each insert when it commits;
// InnoDB then takes one of the INSERTs for a deadlock victim (1213: both
// hold a shared lock on the deleted record and want to insert), which an
// autocommit statement rolls back entirely. One acquisition takes the key,
// every other is refused by its lock (ErrInProgress), not failed as if the
// store were down.
func TestAcquireRacingInsertsAfterADeleteAreNotUnavailable(t *testing.T) {
	db := newDB(t, plainParams)
	s := newTable(t, db, "review_insert_race")
	ctx := t.Context()
	now := time.UnixMilli(1_800_000_000_000)
	id := "p#k"
	for round := range 5 {
		if _, err := s.Acquire(ctx, store.AcquireRequest{ID: id, Owner: "old", Now: now, LockUntil: now.Add(time.Minute)}); err != nil && !errors.Is(err, store.ErrInProgress) {
			t.Fatal(err)
		}
		del, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := del.ExecContext(ctx, "DELETE FROM review_insert_race WHERE id = ?", id); err != nil {
			t.Fatal(err)
		}
		const racers = 3
		errs := make(chan error, racers)
		for i := range racers {
			go func() {
				at := now.Add(2 * time.Hour)
				_, err := s.Acquire(ctx, store.AcquireRequest{ID: id, Owner: string(rune('A' + i)), Now: at, LockUntil: at.Add(time.Minute)})
				errs <- err
			}()
		}
		// Every racer's INSERT waits on the DELETE's lock before it commits.
		for tries := 0; ; tries++ {
			var waiting int
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND INFO LIKE 'INSERT INTO `review_insert_race`%'").Scan(&waiting); err != nil {
				t.Fatal(err)
			}
			if waiting == racers {
				break
			}
			if tries == 500 {
				t.Fatalf("round %d: %d of %d acquisitions wait on the delete", round, waiting, racers)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := del.Commit(); err != nil {
			t.Fatal(err)
		}
		won := 0
		for range racers {
			switch err := <-errs; {
			case err == nil:
				won++
			case errors.Is(err, store.ErrInProgress):
			default:
				t.Errorf("round %d: an acquisition failed: %v; want a lease or ErrInProgress", round, err)
			}
		}
		if won != 1 {
			t.Errorf("round %d: %d acquisitions took the key; want 1", round, won)
		}
		if _, err := db.ExecContext(ctx, "DELETE FROM review_insert_race"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWorkLockWaitTimeoutSwallowed: a work whose statement timed out
// waiting for another transaction's lock (1205: InnoDB rolls back that
// statement alone, here one that had written nothing yet) and that went
// on commits nothing: a *store.EffectError, the write before the timeout
// not applied, the lock still the lease's. The work's other writes
// without the one that failed are a partial effect, which a PostgreSQL
// transaction (aborted by any failed statement) never commits.
func TestWorkLockWaitTimeoutSwallowed(t *testing.T) {
	db := newDB(t, plainParams)
	s := newTable(t, db, "review_tx_records")
	e := newEffects(t, db)
	now := time.Now().Truncate(time.Millisecond)
	name := "timeout-" + now.String()
	locked := name + "-locked"
	if _, err := db.ExecContext(t.Context(), `INSERT INTO counters (name, n) VALUES (?, 0)`, locked); err != nil {
		t.Fatal(err)
	}
	other, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback()
	if _, err := other.ExecContext(t.Context(), `UPDATE counters SET n = n + 1 WHERE name = ?`, locked); err != nil {
		t.Fatal(err)
	}
	tx := s.Begin(acquire(t, s, "p#"+name, "o", now))
	ctx := store.ContextWithTx(t.Context(), tx)
	if err := e.Add(t.Context(), tx, name+"-before", false); err != nil {
		t.Fatal(err)
	}
	work, err := Tx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := work.ExecContext(ctx, `SET SESSION innodb_lock_wait_timeout = 1`); err != nil {
		t.Fatal(err)
	}
	_, err = work.ExecContext(ctx, `UPDATE counters SET n = n + 1 WHERE name = ?`, locked)
	if code(err) != errLockWaitTimeout {
		t.Fatalf("the work's UPDATE of the locked row returned %v; want MySQL's lock wait timeout, 1205", err)
	}
	// The work swallows the timeout and returns nil.
	var ee *store.EffectError
	if err := tx.Commit(t.Context(), store.Completion{Until: now.Add(time.Hour)}); !errors.As(err, &ee) {
		t.Errorf("Commit after the work's lock wait timeout returned %v; want a *store.EffectError", err)
	}
	if n := count(t, e, name+"-before"); n != 0 {
		t.Errorf("the work's write before its timeout is there %d times; want 0", n)
	}
	if rec, err := s.Read(t.Context(), "p#"+name); err != nil || rec.Status != store.StatusProcessing {
		t.Errorf("the record is %v (%v); want still the lease's lock", rec, err)
	}
}

// TestCommitAppliedThenKilledIsSettled: a COMMIT the server applied and
// then answered with an error that ends the session (the connection
// killed, the server shutting down: MariaDB's 1927, MySQL's 1317 or 1053
// for a KILL or a shutdown that lands while COMMIT runs) is not a refusal:
// only the record tells whether it applied. Taking every error packet for
// "refused, rolled back" returns ErrNotCommitted for writes that are
// committed, and the work runs again: a duplicate. Here the COMMIT
// applies and its answer is replaced by such an error.
func TestCommitAppliedThenKilledIsSettled(t *testing.T) {
	for _, n := range []uint16{1927, 1317, 1053} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			db := hookedEndDB(t, func(string) {}, func(op string, do func() error) error {
				if err := do(); err != nil || op != "COMMIT" {
					return err
				}
				return &mysql.MySQLError{Number: n, Message: "killed after the commit applied"}
			})
			s := newTable(t, db, "review_killed_commit")
			e := newEffects(t, newDB(t, plainParams))
			now := time.Now().Truncate(time.Millisecond)
			name := fmt.Sprintf("killed-%d-%s", n, now)
			tx := s.Begin(acquire(t, s, "p#"+name, "o", now))
			if err := e.Add(t.Context(), tx, name, false); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(t.Context(), store.Completion{Until: now.Add(time.Hour)}); err != nil {
				t.Errorf("Commit of an applied COMMIT answered %d: %v; want nil (the record is COMPLETED by the lease)", n, err)
			}
			if c := count(t, e, name); c != 1 {
				t.Fatalf("the work's write is there %d times; want 1 (the COMMIT applied)", c)
			}
		})
	}
}

// TestFailedRollbackDiscardsTheConnection: a transaction whose ROLLBACK
// failed may still be open on its session, its writes uncommitted; the
// "SET SESSION autocommit = 1" the store runs to give the connection back
// commits an open transaction, so the work's writes would apply after
// Commit or Rollback said nothing was (and the key's next run applies
// them again). A connection whose transaction is not known to have ended
// is closed, never set back and reused. Here the ROLLBACK fails on a live
// connection without running: once after a lost lock (Commit's
// completion matches no row), once for a work that failed (Rollback).
func TestFailedRollbackDiscardsTheConnection(t *testing.T) {
	for _, path := range []string{"lost lock", "work failed"} {
		t.Run(path, func(t *testing.T) {
			db := hookedEndDB(t, func(string) {}, func(op string, do func() error) error {
				if op == "ROLLBACK" {
					return errors.New("the ROLLBACK's answer: an error, the transaction left open")
				}
				return do()
			})
			s := newTable(t, db, "review_failed_rollback")
			e := newEffects(t, newDB(t, plainParams))
			now := time.Now().Truncate(time.Millisecond)
			name := "rollback-" + path + "-" + now.String()
			lease := acquire(t, s, "p#"+name, "o", now)
			tx := s.Begin(lease)
			if err := e.Add(t.Context(), tx, name, false); err != nil {
				t.Fatal(err)
			}
			switch path {
			case "lost lock":
				later := lease.LockExpiresAt.Add(time.Second)
				if _, err := s.Acquire(t.Context(), store.AcquireRequest{ID: "p#" + name, Owner: "new", Now: later, LockUntil: later.Add(time.Minute)}); err != nil {
					t.Fatal(err)
				}
				if err := tx.Commit(t.Context(), store.Completion{Until: now.Add(time.Hour)}); !errors.Is(err, store.ErrLockLost) {
					t.Fatalf("Commit after a takeover: %v; want ErrLockLost", err)
				}
			case "work failed":
				_ = tx.Rollback(t.Context())
			}
			if c := count(t, e, name); c != 0 {
				t.Errorf("the work's write is there %d times after the store said nothing was applied; want 0", c)
			}
		})
	}
}

// TestAutocommitOffDSNIsMisconfigured: a DSN that turns autocommit off
// (the driver sets any parameter it does not know as a session variable:
// "?autocommit=0") leaves every statement of the pool's in a transaction
// nothing commits: an acquisition that no other process sees (a second
// holder runs the key's work) and that is rolled back when the
// connection closes. The store's statements rely on each being its own
// transaction; Check says so, with the fix, rather than passing.
func TestAutocommitOffDSNIsMisconfigured(t *testing.T) {
	plain := newDB(t, plainParams)
	newTable(t, plain, "review_autocommit")
	off := newDB(t, "autocommit=0")
	s := New(off, "review_autocommit")
	now := time.Now()
	if _, err := s.Acquire(t.Context(), store.AcquireRequest{ID: "p#k", Owner: "A", Now: now, LockUntil: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(plain, "review_autocommit").Read(t.Context(), "p#k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another connection reads the lock (%v): the DSN's autocommit=0 did not take", err)
	}
	err := s.Check(t.Context())
	if !errors.Is(err, store.ErrMisconfigured) || !strings.Contains(err.Error(), "autocommit") {
		t.Errorf("Check on a DSN with autocommit off: %v; want ErrMisconfigured naming autocommit", err)
	}
}

// TestSettleWaitsForACommitInFlight: after a COMMIT whose answer was lost
// the settle reads the record on another connection, while the server may
// still be applying that COMMIT (its session alive, the record's row
// locked by the completion's UPDATE). The read must wait for it: a plain
// read (a consistent read, which takes no lock) returns the record as it
// was, still the lease's lock, and Commit would say "not committed" of a
// COMMIT that then applies, and the work would run again. Here the
// in-flight COMMIT is a transaction of the test's own holding the
// completion; the lease's transaction is left unsettled, as after a lost
// answer.
func TestSettleWaitsForACommitInFlight(t *testing.T) {
	db := newDB(t, plainParams)
	s := newTable(t, db, "review_settle")
	now := time.Now().Truncate(time.Millisecond)
	lease := acquire(t, s, "p#k", "o", now)
	inflight, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer inflight.Rollback()
	if _, err := inflight.ExecContext(t.Context(), s.q.completeTx, now.Add(time.Hour).Unix(), nil, nil, lease.ID, lease.Owner, lease.Fence); err != nil {
		t.Fatal(err)
	}
	tx := &transaction{s: s, lease: lease, state: txUnsettled}
	settled := make(chan error, 1)
	go func() { settled <- tx.Commit(t.Context(), store.Completion{Until: now.Add(time.Hour)}) }()
	// The settle's read is under way, waiting (or it has answered).
	for tries := 0; ; tries++ {
		var waiting int
		if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND INFO LIKE 'SELECT % FROM `review_settle`%'").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting == 1 || len(settled) == 1 {
			break
		}
		if tries == 500 {
			t.Fatal("the settle's read never ran")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-settled:
		t.Fatalf("the settle answered %v while the COMMIT was in flight; want it to wait for it", err)
	default:
	}
	if err := inflight.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-settled; err != nil {
		t.Errorf("settle after the COMMIT applied: %v; want nil", err)
	}
}
