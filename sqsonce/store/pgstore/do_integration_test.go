//go:build integration

package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqs-once/sqs-once/internal/local/pgserver"
	"github.com/sqs-once/sqs-once/internal/local/sqlfaults"
	"github.com/sqs-once/sqs-once/internal/local/sqlproxy"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/pgstore"
)

// ordersTable creates a business table of the test's: one row per order
// written, no key constraint, so that a duplicate shows as a second row.
func ordersTable(t testing.TB, pool *pgxpool.Pool, name string) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), `CREATE TABLE IF NOT EXISTS `+name+` (n bigserial PRIMARY KEY, key text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
}

// insertOrder is the work: an order row for key in the work's
// transaction (pgstore.Tx), or, plain, on pool by itself (autocommit).
func insertOrder(ctx context.Context, pool *pgxpool.Pool, table, key string, tx bool) error {
	q := `INSERT INTO ` + table + ` (key) VALUES ($1)`
	if !tx {
		_, err := pool.Exec(ctx, q, key)
		return err
	}
	ptx, err := pgstore.Tx(ctx)
	if err != nil {
		return err
	}
	_, err = ptx.Exec(ctx, q, key)
	return err
}

// orders counts the rows of table by key.
func orders(t testing.TB, pool *pgxpool.Pool, table string) map[string]int {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT key, count(*) FROM `+table+` GROUP BY key`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := map[string]int{}
	for rows.Next() {
		var k string
		var c int
		if err := rows.Scan(&k, &c); err != nil {
			t.Fatal(err)
		}
		n[k] = c
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPausedHolderCommitsNothing: holder A writes its order in its
// transaction and pauses past its lock; holder B takes the key over and
// commits its order; A resumes and returns: its commit finds the record
// no longer its lock (ErrLockLost), and exactly one order row is there.
func TestPausedHolderCommitsNothing(t *testing.T) {
	pool := newPool(t, "")
	s := newTable(t, pool, "do_records")
	ordersTable(t, pool, "do_orders")
	base := time.Now().Truncate(time.Millisecond)
	key := "paused-" + base.String()
	a, b := sqlfaults.Processor(t, s, base), sqlfaults.Processor(t, s, base.Add(2*sqlfaults.LockFor))
	written, resume := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- a.Do(t.Context(), key, func(ctx context.Context) error {
			if err := insertOrder(ctx, pool, "do_orders", key, true); err != nil {
				return err
			}
			close(written)
			<-resume
			return nil
		})
	}()
	select {
	case <-written:
	case err := <-done:
		t.Fatalf("holder A ended before writing: %v", err)
	}
	if err := b.Do(t.Context(), key, func(ctx context.Context) error { return insertOrder(ctx, pool, "do_orders", key, true) }); err != nil {
		t.Fatalf("holder B's takeover: %v", err)
	}
	close(resume)
	if err := <-done; !errors.Is(err, sqsonce.ErrLockLost) {
		t.Errorf("the paused holder's Do returned %v; want an error matching ErrLockLost", err)
	}
	if n := orders(t, pool, "do_orders")[key]; n != 1 {
		t.Errorf("%d order rows for the key; want exactly 1", n)
	}
	if err := b.Do(t.Context(), key, func(context.Context) error { t.Error("a duplicate ran"); return nil }); !errors.Is(err, sqsonce.ErrDuplicate) {
		t.Errorf("a later delivery returned %v; want ErrDuplicate", err)
	}
}

// TestProcessorCheckOnAMissingTable: Processor.Check on a store whose
// table does not exist says so, matching ErrMisconfigured, and gives the
// fix.
func TestProcessorCheckOnAMissingTable(t *testing.T) {
	p := sqlfaults.Processor(t, pgstore.New(newPool(t, ""), "no_such_table"), time.Now())
	err := p.Check(t.Context())
	if !errors.Is(err, sqsonce.ErrMisconfigured) || !strings.Contains(err.Error(), "pgstore.CreateTable") || !strings.Contains(err.Error(), "CREATE TABLE") {
		t.Errorf("Check on a missing table returned %v; want ErrMisconfigured with pgstore.CreateTable and the CREATE TABLE", err)
	}
}

// TestFaultsCountEffects: sqlfaults.FaultsCountEffects on PostgreSQL
// (pool connections that all wait for one more fail a key within 30s).
func TestFaultsCountEffects(t *testing.T) {
	direct := newPool(t, "")
	sqlfaults.FaultsCountEffects(t, func(t *testing.T, mode string, tx bool) sqlfaults.Orders {
		records, table := "fault_records_"+mode, "fault_orders_"+mode
		newTable(t, direct, records)
		ordersTable(t, direct, table)
		if _, err := direct.Exec(t.Context(), `TRUNCATE `+records+`, `+table); err != nil {
			t.Fatal(err)
		}
		work := func(pool *pgxpool.Pool) func(string) func(context.Context) error {
			return func(key string) func(context.Context) error {
				return func(ctx context.Context) error { return insertOrder(ctx, pool, table, key, tx) }
			}
		}
		return sqlfaults.Orders{
			Store: pgstore.New(direct, records),
			Work:  work(direct),
			Proxied: func(ctx context.Context) (store.Store, *sqlproxy.Proxy, func(string) func(context.Context) error, func(), error) {
				proxy := pgserver.NewProxy(t, server)
				pool, err := pgxpool.New(ctx, proxy.DSN)
				if err != nil {
					proxy.Close()
					return nil, nil, nil, nil, err
				}
				return pgstore.New(pool, records), proxy, work(pool), func() { pool.Close(); proxy.Close() }, nil
			},
			Count: func(t testing.TB) map[string]int { return orders(t, direct, table) },
		}
	}, 30*time.Second)
}
