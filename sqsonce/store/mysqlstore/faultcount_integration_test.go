//go:build integration

package mysqlstore

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/internal/local/sqlfaults"
	"github.com/sqs-once/sqs-once/internal/local/sqlproxy"
	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// faultOrders counts the rows of the business table by key, read
// directly (not through the store).
func faultOrders(t testing.TB, db *sql.DB, table string) map[string]int {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT order_key, COUNT(*) FROM `+table+` GROUP BY order_key`)
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

// TestFaultsCountEffects: sqlfaults.FaultsCountEffects on MariaDB (a
// lock wait that never ends fails a key within 60s).
func TestFaultsCountEffects(t *testing.T) {
	direct := newDB(t, plainParams)
	sqlfaults.FaultsCountEffects(t, func(t *testing.T, mode string, tx bool) sqlfaults.Orders {
		records, table := "fault_records_"+mode, "fault_orders_"+mode
		newTable(t, direct, records)
		ordersTable(t, direct, table)
		if _, err := direct.ExecContext(t.Context(), `TRUNCATE TABLE `+table); err != nil {
			t.Fatal(err)
		}
		work := func(db *sql.DB) func(string) func(context.Context) error {
			return func(key string) func(context.Context) error {
				return func(ctx context.Context) error { return insertOrder(ctx, db, table, key, tx) }
			}
		}
		return sqlfaults.Orders{
			Store: New(direct, records),
			Work:  work(direct),
			Proxied: func(ctx context.Context) (store.Store, *sqlproxy.Proxy, func(string) func(context.Context) error, func(), error) {
				proxy, dsn := faultProxy(t)
				db, err := sql.Open("mysql", dsn)
				if err != nil {
					proxy.Close()
					return nil, nil, nil, nil, err
				}
				return New(db, records), proxy, work(db), func() { db.Close(); proxy.Close() }, nil
			},
			Count: func(t testing.TB) map[string]int { return faultOrders(t, direct, table) },
		}
	}, 60*time.Second)
}
