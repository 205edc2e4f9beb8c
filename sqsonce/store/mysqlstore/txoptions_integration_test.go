//go:build integration

package mysqlstore_test

import (
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/mysqlstore"
)

// TestBeginTxOptions: the isolation level BeginTx is given is the work's
// (READ COMMITTED sees a row committed by another transaction since its
// first read, REPEATABLE READ does not); a later BeginTx with other
// options fails and Tx returns the transaction as it is; a READ ONLY
// transaction's completion is refused: ErrNotCommitted, nothing applied.
func TestBeginTxOptions(t *testing.T) {
	db := newDB(t, plainParams)
	s := newTable(t, db, "txopt_records")
	e := newEffects(t, db)
	for _, c := range []struct {
		level   sql.IsolationLevel
		seesNew bool
	}{{sql.LevelReadCommitted, true}, {sql.LevelRepeatableRead, false}} {
		now := time.Now().Truncate(time.Millisecond)
		name := c.level.String() + "-" + now.String()
		tx := s.Begin(acquire(t, s, "p#"+name, "o", now))
		ctx := store.ContextWithTx(t.Context(), tx)
		stx, err := mysqlstore.BeginTx(ctx, &sql.TxOptions{Isolation: c.level})
		if err != nil {
			t.Fatal(err)
		}
		seen := func() int {
			var n int
			if err := stx.QueryRowContext(ctx, `SELECT COUNT(*) FROM counters WHERE name = ?`, name+"-other").Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		seen() // the first read: REPEATABLE READ's snapshot
		if _, err := db.ExecContext(t.Context(), `INSERT INTO counters (name, n) VALUES (?, 1)`, name+"-other"); err != nil {
			t.Fatal(err)
		}
		if got := seen() == 1; got != c.seesNew {
			t.Errorf("%s: the work sees a row committed since its first read: %v; want %v", c.level, got, c.seesNew)
		}
		if _, err := mysqlstore.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelSerializable}); err == nil {
			t.Errorf("%s: a second BeginTx with another level succeeded; want an error (the transaction has begun)", c.level)
		}
		if again, err := mysqlstore.Tx(ctx); err != nil || again != stx {
			t.Errorf("%s: Tx after BeginTx returned %p, %v; want the same transaction", c.level, again, err)
		}
		if err := e.Add(t.Context(), tx, name, false); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(t.Context(), store.Completion{Until: now.Add(time.Hour)}); err != nil {
			t.Errorf("%s: Commit: %v", c.level, err)
		}
		if n := count(t, e, name); n != 1 {
			t.Errorf("%s: the effect is there %d times; want 1", c.level, n)
		}
	}

	now := time.Now().Truncate(time.Millisecond)
	name := "readonly-" + now.String()
	tx := s.Begin(acquire(t, s, "p#"+name, "o", now))
	if _, err := mysqlstore.BeginTx(store.ContextWithTx(t.Context(), tx), &sql.TxOptions{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(t.Context(), store.Completion{Until: now.Add(time.Hour)}); !errors.Is(err, store.ErrNotCommitted) {
		t.Errorf("Commit of a READ ONLY transaction returned %v; want ErrNotCommitted", err)
	}
	if rec, err := s.Read(t.Context(), "p#"+name); err != nil || rec.Status != store.StatusProcessing {
		t.Errorf("the record after a refused READ ONLY commit is %v (%v); want still the lease's lock", rec, err)
	}
}

// TestRenewalDuringTheWorkCommits: at every isolation level, a renewal of
// the lock (on the pool) after the work's first read does not refuse the
// completion: InnoDB's UPDATE reads the row's latest version, where
// PostgreSQL's REPEATABLE READ would refuse it. A takeover after that
// first read still refuses it. (The work does not read the store's table:
// under SERIALIZABLE that read would lock the record's row, and the
// renewal would wait for the work's end.)
func TestRenewalDuringTheWorkCommits(t *testing.T) {
	db := newDB(t, plainParams)
	s := newTable(t, db, "renewal_records")
	e := newEffects(t, db)
	for _, level := range []sql.IsolationLevel{sql.LevelReadCommitted, sql.LevelRepeatableRead, sql.LevelSerializable} {
		for _, takeover := range []bool{false, true} {
			now := time.Now().Truncate(time.Millisecond)
			name := level.String() + "-" + now.String()
			id := "p#" + name
			lease := acquire(t, s, id, "o", now)
			tx := s.Begin(lease)
			ctx := store.ContextWithTx(t.Context(), tx)
			stx, err := mysqlstore.BeginTx(ctx, &sql.TxOptions{Isolation: level})
			if err != nil {
				t.Fatal(err)
			}
			var n int
			if err := stx.QueryRowContext(ctx, `SELECT COUNT(*) FROM counters WHERE name = ?`, name).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if err := e.Add(t.Context(), tx, name, false); err != nil {
				t.Fatal(err)
			}
			later := now.Add(2 * time.Minute)
			if takeover {
				_, err = s.Acquire(t.Context(), store.AcquireRequest{ID: id, Owner: "b", Now: later, LockUntil: later.Add(time.Minute)})
			} else {
				_, err = s.Renew(t.Context(), lease, later)
			}
			if err != nil {
				t.Fatalf("%s, takeover %v: %v", level, takeover, err)
			}
			err = tx.Commit(t.Context(), store.Completion{Until: now.Add(time.Hour)})
			switch {
			case takeover && !errors.Is(err, store.ErrLockLost):
				t.Errorf("%s: Commit after a takeover returned %v; want ErrLockLost", level, err)
			case !takeover && err != nil:
				t.Errorf("%s: Commit after a renewal returned %v; want nil", level, err)
			}
			want := map[bool]int{false: 1, true: 0}[takeover]
			if n := count(t, e, name); n != want {
				t.Errorf("%s, takeover %v: the effect is there %d times; want %d", level, takeover, n, want)
			}
		}
	}
}
