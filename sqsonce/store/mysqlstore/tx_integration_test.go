//go:build integration

package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/mysqlstore"
	"github.com/sqs-once/sqs-once/sqsonce/store/storetest"
)

// effects is storetest.Effects on MySQL: a counter is a row of counters,
// incremented in the work's transaction (mysqlstore.Tx); a refused write
// is a row inserted twice into refusals, whose primary key refuses the
// second (1062). MySQL checks constraints at the statement, not at the
// COMMIT: the statement fails at once, the server rolls back that
// statement alone, and the work could go on; Add reports the refusal as
// the suite's Effects do (nil: the write is added), and the store must
// refuse the whole transaction when it commits.
type effects struct{ db *sql.DB }

// newEffects creates the effects' tables (shared by the tests) if needed.
func newEffects(t testing.TB, db *sql.DB) effects {
	t.Helper()
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS counters (name VARBINARY(255) PRIMARY KEY, n INT NOT NULL) ENGINE = InnoDB`,
		`CREATE TABLE IF NOT EXISTS refusals (name VARBINARY(255) PRIMARY KEY) ENGINE = InnoDB`,
	} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	return effects{db: db}
}

func (e effects) Add(ctx context.Context, tx store.Tx, name string, refused bool) error {
	stx, err := mysqlstore.Tx(store.ContextWithTx(ctx, tx))
	if err != nil {
		return err
	}
	if refused {
		_, err = stx.ExecContext(ctx, `INSERT INTO refusals (name) VALUES (?), (?)`, name, name)
		var my *mysql.MySQLError
		if errors.As(err, &my) && my.Number == 1062 {
			return nil // refused, as it must be: the commit must refuse too
		}
		if err == nil {
			return fmt.Errorf("the refused write of %q was taken", name)
		}
		return err
	}
	_, err = stx.ExecContext(ctx, `INSERT INTO counters (name, n) VALUES (?, 1) ON DUPLICATE KEY UPDATE n = n + 1`, name)
	return err
}

func (e effects) Count(ctx context.Context, name string) (int, error) {
	var n int
	err := e.db.QueryRowContext(ctx, `SELECT n FROM counters WHERE name = ?`, name).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// TestTransactionsOnMariaDB: the store passes the transactional rules, on
// both kinds of connection.
func TestTransactionsOnMariaDB(t *testing.T) {
	for _, dsn := range []struct{ name, params string }{{"plain", plainParams}, {"clientFoundRows", foundParams}} {
		t.Run(dsn.name, func(t *testing.T) {
			db := newDB(t, dsn.params)
			s := newTable(t, db, "transactions_"+dsn.name)
			e := newEffects(t, db)
			storetest.TestTransactions(t, func(t *testing.T) (store.Transactor, storetest.Effects) { return s, e })
		})
	}
}
