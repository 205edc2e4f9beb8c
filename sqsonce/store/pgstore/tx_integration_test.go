//go:build integration

package pgstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/pgstore"
	"github.com/sqs-once/sqs-once/sqsonce/store/storetest"
)

// effects is storetest.Effects on PostgreSQL: a counter is a row of
// counters, incremented in the work's transaction (pgstore.Tx); a refused
// write is a row inserted twice into refusals, whose unique constraint is
// DEFERRABLE INITIALLY DEFERRED: the statements pass and the COMMIT fails
// (23505), as a user's deferred constraint refuses a transaction.
type effects struct{ pool *pgxpool.Pool }

// newEffects creates the effects' tables (shared by the tests) if needed.
func newEffects(t testing.TB, pool *pgxpool.Pool) effects {
	t.Helper()
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS counters (name text PRIMARY KEY, n int NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS refusals (name text, CONSTRAINT refusals_once UNIQUE (name) DEFERRABLE INITIALLY DEFERRED)`,
	} {
		if _, err := pool.Exec(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	return effects{pool: pool}
}

func (e effects) Add(ctx context.Context, tx store.Tx, name string, refused bool) error {
	ptx, err := pgstore.Tx(store.ContextWithTx(ctx, tx))
	if err != nil {
		return err
	}
	if refused {
		_, err = ptx.Exec(ctx, `INSERT INTO refusals (name) VALUES ($1), ($1)`, name)
		return err
	}
	_, err = ptx.Exec(ctx, `INSERT INTO counters (name, n) VALUES ($1, 1) ON CONFLICT (name) DO UPDATE SET n = counters.n + 1`, name)
	return err
}

func (e effects) Count(ctx context.Context, name string) (int, error) {
	var n int
	err := e.pool.QueryRow(ctx, `SELECT n FROM counters WHERE name = $1`, name).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// TestTransactionsOnPostgres: the store passes the transactional rules.
func TestTransactionsOnPostgres(t *testing.T) {
	pool := newPool(t, "")
	s := newTable(t, pool, "transactions")
	e := newEffects(t, pool)
	storetest.TestTransactions(t, func(t *testing.T) (store.Transactor, storetest.Effects) { return s, e })
}
