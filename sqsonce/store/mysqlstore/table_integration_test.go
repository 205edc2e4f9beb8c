//go:build integration

package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/mysqlstore"
)

// acquire takes id's lock for owner at now, for a minute, or fails t.
func acquire(t testing.TB, s *mysqlstore.Store, id, owner string, now time.Time) store.Lease {
	t.Helper()
	lease, err := s.Acquire(t.Context(), store.AcquireRequest{ID: id, Owner: owner, Now: now, LockUntil: now.Add(time.Minute)})
	if err != nil {
		t.Fatalf("Acquire(%q): %v", id, err)
	}
	return lease
}

// count is e's counter of name, or fails t.
func count(t testing.TB, e effects, name string) int {
	t.Helper()
	n, err := e.Count(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCreateTableRacesAndCheck: CreateTable run by two processes at once
// (two pools, the same new table) succeeds in both, again after, and on a
// database-qualified name; Check passes on its table, which has the
// sweep's index.
func TestCreateTableRacesAndCheck(t *testing.T) {
	a, b := newDB(t, plainParams), newDB(t, foundParams)
	if _, err := a.ExecContext(t.Context(), "CREATE DATABASE IF NOT EXISTS idem"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"created_racing", "idem.records"} {
		if _, err := a.ExecContext(t.Context(), "DROP TABLE IF EXISTS "+name); err != nil {
			t.Fatal(err)
		}
		for round := range 2 {
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, db := range []*sql.DB{a, b} {
				wg.Go(func() { errs[i] = mysqlstore.CreateTable(t.Context(), db, name) })
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("round %d: CreateTable(%q) by process %d, beside another: %v", round, name, i, err)
				}
			}
		}
		if err := mysqlstore.New(a, name).Check(t.Context()); err != nil {
			t.Errorf("Check on the table CreateTable made (%q): %v", name, err)
		}
	}
	var idx int
	if err := a.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'created_racing' AND COLUMN_NAME = 'expires_at'`).Scan(&idx); err != nil || idx != 1 {
		t.Errorf("%d indexes on expires_at (%v); want the sweep's one", idx, err)
	}
}

// store's columns, for the tables of TestCheckSaysWhatIsWrong.
const (
	okCols = "id VARBINARY(2048) NOT NULL, status VARBINARY(16) NOT NULL, owner VARBINARY(2048) NOT NULL, fence BIGINT NOT NULL, lock_expires_at BIGINT NULL, expires_at BIGINT NOT NULL, payload_hash VARBINARY(2048) NOT NULL DEFAULT '', result MEDIUMBLOB NULL, outbox MEDIUMBLOB NULL, version BIGINT NOT NULL DEFAULT 0"
	innodb = " ENGINE = InnoDB"
)

// TestCheckSaysWhatIsWrong: a missing table, MyISAM, a column missing or
// of another type, a collated key, another primary key, a NOT NULL
// column the store does not write, a user without the privileges:
// ErrMisconfigured naming the problem and its fix; a server that does not
// answer: ErrUnavailable.
func TestCheckSaysWhatIsWrong(t *testing.T) {
	db := newDB(t, plainParams)
	for _, c := range []struct {
		table, ddl, want, fix string
	}{
		{"check_missing", "", "does not exist", "CREATE TABLE IF NOT EXISTS"},
		{"check_myisam", "(" + strings.Replace(okCols, "id VARBINARY(2048)", "id VARBINARY(1000)", 1) + ", PRIMARY KEY (id)) ENGINE = MyISAM", "is MyISAM, not InnoDB", "ALTER TABLE `check_myisam` ENGINE = InnoDB"},
		{"check_no_outbox", "(" + strings.Replace(okCols, ", outbox MEDIUMBLOB NULL", "", 1) + ", PRIMARY KEY (id))" + innodb, "no column outbox (mediumblob)", "CREATE TABLE IF NOT EXISTS"},
		{"check_int_fence", "(" + strings.Replace(okCols, "fence BIGINT", "fence INT", 1) + ", PRIMARY KEY (id))" + innodb, "column fence is int", "CREATE TABLE IF NOT EXISTS"},
		{"check_blob_result", "(" + strings.Replace(okCols, "result MEDIUMBLOB", "result BLOB", 1) + ", PRIMARY KEY (id))" + innodb, "column result is blob, not mediumblob", "CREATE TABLE IF NOT EXISTS"},
		{"check_varchar_id", "(" + strings.Replace(okCols, "id VARBINARY(2048)", "id VARCHAR(512) CHARACTER SET utf8mb4", 1) + ", PRIMARY KEY (id))" + innodb, "column id is varchar(512)", "MODIFY id VARBINARY(2048) NOT NULL"},
		{"check_pk", "(" + okCols + ", PRIMARY KEY (id, fence))" + innodb, "the primary key is (id, fence), not (id)", "CREATE TABLE IF NOT EXISTS"},
		{"check_extra", "(" + okCols + ", tenant VARCHAR(10) NOT NULL, PRIMARY KEY (id))" + innodb, "column tenant is NOT NULL without a default", "CREATE TABLE IF NOT EXISTS"},
	} {
		if _, err := db.ExecContext(t.Context(), "DROP TABLE IF EXISTS "+c.table); err != nil {
			t.Fatal(err)
		}
		if c.ddl != "" {
			if _, err := db.ExecContext(t.Context(), "CREATE TABLE "+c.table+" "+c.ddl); err != nil {
				t.Fatal(err)
			}
		}
		err := mysqlstore.New(db, c.table).Check(t.Context())
		if !errors.Is(err, store.ErrMisconfigured) || errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.fix) {
			t.Errorf("Check on %s returned %v; want ErrMisconfigured alone, saying %q and %q", c.table, err, c.want, c.fix)
		}
	}

	// A user who may only read the table: the privileges are named, and
	// the GRANT given.
	s := newTable(t, db, "check_grants")
	for _, q := range []string{
		"DROP USER IF EXISTS 'reader'@'%'", "CREATE USER 'reader'@'%'",
		"GRANT SELECT ON check_grants TO 'reader'@'%'",
	} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Passwd = "reader", ""
	reader, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	err = mysqlstore.New(reader, "check_grants").Check(t.Context())
	if !errors.Is(err, store.ErrMisconfigured) || !strings.Contains(err.Error(), "may not insert, update, delete in `check_grants`") || !strings.Contains(err.Error(), "GRANT SELECT, INSERT, UPDATE, DELETE ON `check_grants`") {
		t.Errorf("Check as a user who may only select returned %v; want ErrMisconfigured naming insert, update, delete and the GRANT", err)
	}
	now := time.Now()
	_, err = mysqlstore.New(reader, "check_grants").Acquire(t.Context(), store.AcquireRequest{ID: "p#k", Owner: "o", Now: now, LockUntil: now.Add(time.Minute)})
	var my *mysql.MySQLError
	if !errors.Is(err, store.ErrMisconfigured) || !errors.As(err, &my) || my.Number != 1142 || !strings.Contains(err.Error(), "grant the store's user SELECT, INSERT, UPDATE, DELETE") {
		t.Errorf("Acquire as a user who may only select returned %v; want ErrMisconfigured, unwrapping to MySQL's 1142, with the GRANT", err)
	}
	if err := s.Check(t.Context()); err != nil {
		t.Errorf("Check as the table's owner: %v", err)
	}

	down, err := sql.Open("mysql", "root@tcp(127.0.0.1:1)/sqsonce?timeout=5s")
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	if err := mysqlstore.New(down, "x").Check(t.Context()); !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrMisconfigured) {
		t.Errorf("Check on a server that does not answer returned %v; want ErrUnavailable alone", err)
	}
}

// TestErrorsOnAMissingTable: a method on a table that does not exist is a
// *store.StoreError matching ErrMisconfigured alone, unwrapping to the
// *mysql.MySQLError (1146), and gives the fix; a database that does not
// exist (1049) is ErrMisconfigured too; a server that does not answer,
// ErrUnavailable alone.
func TestErrorsOnAMissingTable(t *testing.T) {
	s := mysqlstore.New(newDB(t, plainParams), "no_such_records")
	now := time.Now()
	_, err := s.Acquire(t.Context(), store.AcquireRequest{ID: "p#k", Owner: "o", Now: now, LockUntil: now.Add(time.Minute)})
	var se *store.StoreError
	var my *mysql.MySQLError
	if !errors.As(err, &se) || !errors.Is(err, store.ErrMisconfigured) || errors.Is(err, store.ErrUnavailable) || !errors.As(err, &my) || my.Number != 1146 || !strings.Contains(err.Error(), "mysqlstore.CreateTable") {
		t.Errorf("Acquire on a missing table returned %v; want a StoreError matching ErrMisconfigured alone, with MySQL's 1146 and the fix", err)
	}
	if _, err := s.Read(t.Context(), "p#k"); !errors.Is(err, store.ErrMisconfigured) {
		t.Errorf("Read on a missing table returned %v; want ErrMisconfigured", err)
	}
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = "no_such_database"
	nodb, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer nodb.Close()
	if _, err := mysqlstore.New(nodb, "x").Read(t.Context(), "p#k"); !errors.Is(err, store.ErrMisconfigured) || !errors.As(err, &my) || my.Number != 1049 {
		t.Errorf("Read in a database that does not exist returned %v; want ErrMisconfigured, MySQL's 1049", err)
	}
	down, err := sql.Open("mysql", "root@tcp(127.0.0.1:1)/sqsonce?timeout=5s")
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	if _, err := mysqlstore.New(down, "x").Acquire(t.Context(), store.AcquireRequest{ID: "p#k", Owner: "o", Now: now, LockUntil: now.Add(time.Minute)}); !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrMisconfigured) {
		t.Errorf("Acquire on a server that does not answer returned %v; want ErrUnavailable alone", err)
	}
}

// TestForeignRecords: a row the protocol did not write (a status of its
// own, a lock without an expiry) is a *store.RecordError from Read and
// Acquire, with the row as far as it reads, and is left alone.
func TestForeignRecords(t *testing.T) {
	db := newDB(t, plainParams)
	newTable(t, db, "foreign_records")
	s := mysqlstore.New(db, "foreign_records")
	now := time.Now()
	future := now.Add(time.Hour).Unix()
	for id, ins := range map[string]string{
		"p#status": `INSERT INTO foreign_records (id, status, owner, fence, expires_at) VALUES (?, 'DONE', 'someone', 3, ?)`,
		"p#nolock": `INSERT INTO foreign_records (id, status, owner, fence, expires_at) VALUES (?, 'PROCESSING', 'someone', 3, ?)`,
	} {
		if _, err := db.ExecContext(t.Context(), ins, id, future); err != nil {
			t.Fatal(err)
		}
		var re *store.RecordError
		rec, err := s.Read(t.Context(), id)
		if !errors.As(err, &re) || !errors.Is(err, store.ErrMisconfigured) || rec.Owner != "someone" || rec.Fence != 3 {
			t.Errorf("Read of %s returned %v, %v; want a RecordError with the row as far as it reads", id, rec, err)
		}
		if _, err := s.Acquire(t.Context(), store.AcquireRequest{ID: id, Owner: "o", Now: now, LockUntil: now.Add(time.Minute)}); !errors.As(err, &re) {
			t.Errorf("Acquire of %s returned %v; want a RecordError", id, err)
		}
		var owner string
		if err := db.QueryRowContext(t.Context(), `SELECT owner FROM foreign_records WHERE id = ?`, id).Scan(&owner); err != nil || owner != "someone" {
			t.Errorf("the foreign row %s changed: owner %q (%v)", id, owner, err)
		}
	}
}

// TestSweep: records past their ExpiresAt count as absent (Read, Acquire
// as a new record) and Sweep deletes them, in batches, up to its limit;
// the rest stay.
func TestSweep(t *testing.T) {
	db := newDB(t, plainParams)
	s := newTable(t, db, "sweep_records")
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond)
	// Locks taken two hours ago for a minute: their records (kept an hour
	// past the lock) expired about an hour ago.
	old := now.Add(-2 * time.Hour)
	for i := range 5 {
		acquire(t, s, "p#old-"+string(rune('a'+i)), "o", old)
	}
	live := acquire(t, s, "p#live", "o", now)
	done := acquire(t, s, "p#done", "o", now)
	if err := s.Complete(ctx, done, store.Completion{Until: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(ctx, "p#old-a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Read of a record past its ExpiresAt returned %v; want ErrNotFound (as TTL would have deleted it)", err)
	}
	if _, err := s.Acquire(ctx, store.AcquireRequest{ID: "p#old-e", Owner: "o2", Now: now, LockUntil: now.Add(time.Minute)}); err != nil {
		t.Errorf("Acquire of a record past its ExpiresAt: %v; want the lock", err)
	}
	n, err := s.Sweep(ctx, now, 3)
	if err != nil || n != 3 {
		t.Fatalf("Sweep with limit 3 deleted %d (%v); want 3", n, err)
	}
	n, err = s.Sweep(ctx, now, 100)
	if err != nil || n != 1 {
		t.Fatalf("the next Sweep deleted %d (%v); want the 1 left", n, err)
	}
	var left int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sweep_records`).Scan(&left); err != nil || left != 3 {
		t.Errorf("%d records left (%v); want the live locks and the completion", left, err)
	}
	if rec, err := s.Read(ctx, "p#live"); err != nil || rec.Fence != live.Fence {
		t.Errorf("the live lock after Sweep: %v, %v", rec, err)
	}
	// The window's last second is kept: swept only once it is before now.
	end := time.Unix(now.Add(time.Minute).Unix(), 0)
	if n, err := s.Sweep(ctx, end, 100); err != nil || n != 0 {
		t.Errorf("Sweep at the window's end deleted %d (%v); want 0", n, err)
	}
	if n, err := s.Sweep(ctx, end.Add(time.Second), 100); err != nil || n != 1 {
		t.Errorf("Sweep a second after the window deleted %d (%v); want the completion", n, err)
	}
}

// TestTxEndedByTheWork: Tx without a transaction in the context is
// ErrNoTx; a work that rolls its *sql.Tx back itself (a deferred
// tx.Rollback()) has nothing committed: the Commit is ErrNotCommitted,
// saying why, the record still the lease's lock.
func TestTxEndedByTheWork(t *testing.T) {
	if _, err := mysqlstore.Tx(context.Background()); !errors.Is(err, mysqlstore.ErrNoTx) {
		t.Errorf("Tx of a context without a transaction returned %v; want ErrNoTx", err)
	}
	db := newDB(t, plainParams)
	s := newTable(t, db, "tx_records")
	e := newEffects(t, db)
	now := time.Now().Truncate(time.Millisecond)
	name := "rollback-" + now.String()
	lease := acquire(t, s, "p#"+name, "o", now)
	tx := s.Begin(lease)
	if !tx.Empty() {
		t.Error("a transaction begun is not Empty")
	}
	ctx := store.ContextWithTx(t.Context(), tx)
	stx, err := mysqlstore.Tx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tx.Empty() {
		t.Error("after Tx the transaction is Empty")
	}
	if err := e.Add(t.Context(), tx, name, false); err != nil {
		t.Fatal(err)
	}
	if err := stx.Rollback(); err != nil {
		t.Fatal(err)
	}
	err = tx.Commit(t.Context(), store.Completion{Until: now.Add(time.Hour)})
	if !errors.Is(err, store.ErrNotCommitted) || !strings.Contains(err.Error(), "must not call its Commit or Rollback") {
		t.Errorf("Commit after the work rolled its transaction back returned %v; want ErrNotCommitted saying why", err)
	}
	if n := count(t, e, name); n != 0 {
		t.Errorf("the effect is there %d times; want 0", n)
	}
	if rec, err := s.Read(t.Context(), "p#"+name); err != nil || rec.Status != store.StatusProcessing {
		t.Errorf("the record is %v (%v); want still the lease's lock", rec, err)
	}
}

// TestWorkStatementFailed: a work whose own statement failed (a foreign
// key, a CHECK constraint, a deadlock that rolled its transaction back)
// and that went on and returned nil commits nothing: a
// *store.EffectError, the lock still the lease's, the writes before and
// after the failed statement not applied.
func TestWorkStatementFailed(t *testing.T) {
	db := newDB(t, plainParams)
	s := newTable(t, db, "tx_records")
	e := newEffects(t, db)
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS parents (id INT PRIMARY KEY) ENGINE = InnoDB`,
		`CREATE TABLE IF NOT EXISTS children (id INT PRIMARY KEY AUTO_INCREMENT, parent INT NOT NULL, FOREIGN KEY (parent) REFERENCES parents (id)) ENGINE = InnoDB`,
		`CREATE TABLE IF NOT EXISTS positives (n INT NOT NULL, CHECK (n > 0)) ENGINE = InnoDB`,
	} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		what, stmt string
		code       uint16
	}{
		{"a foreign key", `INSERT INTO children (parent) VALUES (-1)`, 1452},
		{"a CHECK constraint", `INSERT INTO positives (n) VALUES (-1)`, 4025},
	} {
		now := time.Now().Truncate(time.Millisecond)
		name := "failed-" + now.String()
		lease := acquire(t, s, "p#"+name, "o", now)
		tx := s.Begin(lease)
		if err := e.Add(t.Context(), tx, name+"-before", false); err != nil {
			t.Fatal(err)
		}
		stx, err := mysqlstore.Tx(store.ContextWithTx(t.Context(), tx))
		if err != nil {
			t.Fatal(err)
		}
		var my *mysql.MySQLError
		if _, err := stx.ExecContext(t.Context(), c.stmt); !errors.As(err, &my) || my.Number != c.code {
			t.Fatalf("%s: the work's statement returned %v; want MySQL's %d", c.what, err, c.code)
		}
		if err := e.Add(t.Context(), tx, name+"-after", false); err != nil {
			t.Fatal(err)
		}
		var ee *store.EffectError
		if err := tx.Commit(t.Context(), store.Completion{Until: now.Add(time.Hour)}); !errors.As(err, &ee) || ee.ID != "p#"+name {
			t.Errorf("%s: Commit after the work's statement failed returned %v; want a *store.EffectError for the record", c.what, err)
		}
		if n := count(t, e, name+"-before") + count(t, e, name+"-after"); n != 0 {
			t.Errorf("%s: the work's other writes are there %d times; want 0", c.what, n)
		}
		if rec, err := s.Read(t.Context(), "p#"+name); err != nil || rec.Status != store.StatusProcessing {
			t.Errorf("%s: the record is %v (%v); want still the lease's lock", c.what, rec, err)
		}
	}
}

// TestWorkDeadlockSwallowed: a work whose statement lost a deadlock
// (1213: InnoDB rolled its whole transaction back) and that went on, its
// next write in a transaction MySQL began anew, commits nothing: a
// *store.EffectError, neither the write before the deadlock (rolled back
// by it) nor the one after applied, the lock still the lease's.
func TestWorkDeadlockSwallowed(t *testing.T) {
	db := newDB(t, plainParams)
	s := newTable(t, db, "tx_records")
	e := newEffects(t, db)
	now := time.Now().Truncate(time.Millisecond)
	name := "deadlock-" + now.String()
	a, b := name+"-a", name+"-b"
	for _, n := range []string{a, b} {
		if _, err := db.ExecContext(t.Context(), `INSERT INTO counters (name, n) VALUES (?, 0)`, n); err != nil {
			t.Fatal(err)
		}
	}
	tx := s.Begin(acquire(t, s, "p#"+name, "o", now))
	ctx := store.ContextWithTx(t.Context(), tx)
	work, err := mysqlstore.Tx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := work.ExecContext(ctx, `UPDATE counters SET n = n + 1 WHERE name = ?`, a); err != nil {
		t.Fatal(err)
	}
	// Another transaction, heavier (more rows written: InnoDB rolls the
	// lighter one back), takes b, then waits for a; the work waits for b:
	// a deadlock, which the work loses.
	other, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback()
	for i := range 20 {
		if _, err := other.ExecContext(t.Context(), `INSERT INTO counters (name, n) VALUES (?, 1)`, fmt.Sprintf("%s-weight-%d", name, i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.ExecContext(t.Context(), `UPDATE counters SET n = n + 1 WHERE name = ?`, b); err != nil {
		t.Fatal(err)
	}
	// Each now waits for the other, in whichever order the two UPDATEs
	// arrive: InnoDB finds the cycle when the second waits, and rolls the
	// lighter transaction (the work's) back.
	workErr, otherErr := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := work.ExecContext(ctx, `UPDATE counters SET n = n + 1 WHERE name = ?`, b)
		workErr <- err
	}()
	go func() {
		_, err := other.ExecContext(t.Context(), `UPDATE counters SET n = n + 1 WHERE name = ?`, a)
		otherErr <- err
	}()
	var my *mysql.MySQLError
	if err := <-workErr; !errors.As(err, &my) || my.Number != 1213 {
		t.Fatalf("the work's UPDATE of b returned %v; want MySQL's deadlock, 1213", err)
	}
	if err := <-otherErr; err != nil {
		t.Fatalf("the other transaction's UPDATE of a: %v", err)
	}
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	// The work swallows the deadlock and writes on.
	if err := e.Add(t.Context(), tx, name+"-after", false); err != nil {
		t.Fatal(err)
	}
	var ee *store.EffectError
	if err := tx.Commit(t.Context(), store.Completion{Until: now.Add(time.Hour)}); !errors.As(err, &ee) {
		t.Errorf("Commit after the work's deadlock returned %v; want a *store.EffectError", err)
	}
	if n := count(t, e, a); n != 1 {
		t.Errorf("counter a is %d; want 1, the other transaction's increment alone", n)
	}
	if n := count(t, e, name+"-after"); n != 0 {
		t.Errorf("the work's write after its deadlock is there %d times; want 0", n)
	}
	if rec, err := s.Read(t.Context(), "p#"+name); err != nil || rec.Status != store.StatusProcessing {
		t.Errorf("the record is %v (%v); want still the lease's lock", rec, err)
	}
}

// TestSessionSetBack: the transaction's connection goes back to the pool
// with autocommit on, however the transaction ended (committed, rolled
// back, refused for a failed statement, for a lost lock): a pool of one
// connection then runs a plain statement that is committed at once.
func TestSessionSetBack(t *testing.T) {
	db := newDB(t, plainParams)
	db.SetMaxOpenConns(1)
	s := newTable(t, db, "session_records")
	e := newEffects(t, db)
	for _, end := range []string{"commit", "rollback", "failed statement", "lost lock"} {
		now := time.Now().Truncate(time.Millisecond)
		name := end + "-" + now.String()
		lease := acquire(t, s, "p#"+name, "o", now)
		tx := s.Begin(lease)
		if err := e.Add(t.Context(), tx, name, end == "failed statement"); err != nil {
			t.Fatal(err)
		}
		if end == "lost lock" {
			// The pool's one connection is the transaction's: take the
			// lock over from another pool.
			later := now.Add(2 * time.Minute)
			if _, err := mysqlstore.New(newDB(t, plainParams), "session_records").Acquire(t.Context(), store.AcquireRequest{ID: "p#" + name, Owner: "b", Now: later, LockUntil: later.Add(time.Minute)}); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		if end == "rollback" {
			err = tx.Rollback(t.Context())
		} else {
			err = tx.Commit(t.Context(), store.Completion{Until: now.Add(time.Hour)})
		}
		if (err == nil) != (end == "commit" || end == "rollback") {
			t.Errorf("%s: the transaction's end returned %v", end, err)
		}
		var autocommit int
		if err := db.QueryRowContext(t.Context(), `SELECT @@SESSION.autocommit`).Scan(&autocommit); err != nil || autocommit != 1 {
			t.Errorf("after a transaction's %s, the pool's connection has autocommit %d (%v); want 1", end, autocommit, err)
		}
	}
}

// TestTableDocSQLPassesCheck: the page's SQL, run as a reader runs it,
// makes a table Check accepts and the store works on.
func TestTableDocSQLPassesCheck(t *testing.T) {
	db := newDB(t, plainParams)
	if _, err := db.ExecContext(t.Context(), "DROP TABLE IF EXISTS sqs_once_records"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), docDDL(t)); err != nil {
		t.Fatalf("%s's SQL: %v", mysqlDoc, err)
	}
	s := mysqlstore.New(db, "sqs_once_records")
	if err := s.Check(t.Context()); err != nil {
		t.Errorf("Check on the table of %s's SQL: %v", mysqlDoc, err)
	}
	now := time.Now()
	acquire(t, s, "doc#"+now.String(), "o", now)
}
