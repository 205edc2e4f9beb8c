//go:build integration

package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/local/pgserver"
	"github.com/sqs-once/sqs-once/sqsonce/store/pgstore"
)

// server is the one PostgreSQL of this test binary.
var server *pgserver.Server

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	s, err := pgserver.Start(ctx, pgserver.Options{})
	cancel()
	if err != nil {
		// Never skipped: the tier needs the server, and says how to get it.
		fmt.Fprintln(os.Stderr, "pgstore tests:", err)
		os.Exit(1)
	}
	server = s
	// moto_server too, for the emit pipeline's queues and its DynamoDB
	// stage (TestEmitPipelineUnderFaults).
	code := mototest.Run(m)
	s.Stop()
	os.Exit(code)
}

// newPool is a pool on the test server (dsn: another address, a proxy's),
// closed when t ends.
func newPool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	if dsn == "" {
		dsn = server.DSN
	}
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// newTable creates a table of the store's under a name of the test's own
// and returns the store on it.
func newTable(t testing.TB, pool *pgxpool.Pool, name string) *pgstore.Store {
	t.Helper()
	if err := pgstore.CreateTable(t.Context(), pool, name); err != nil {
		t.Fatal(err)
	}
	return pgstore.New(pool, name)
}
