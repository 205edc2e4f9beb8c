//go:build integration

package mysqlstore

import (
	"database/sql"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sqs-once/sqs-once/internal/local/mariaserver"
	"github.com/sqs-once/sqs-once/internal/local/sqlfaults"
	"github.com/sqs-once/sqs-once/internal/local/sqlproxy"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/storetest"
)

// The COMMIT-fault tests of pgstore (sqlfaults) on MariaDB, through
// mariaserver's Proxy, which acts on a COMMIT as pgserver's does; their
// names begin with TestFault so that -run Fault runs them all
// (TestFaultsCountEffects too).

// faultProxy is a mariaserver.Proxy in front of the test binary's server
// (serverDSN's address), closed when t ends, and the DSN of the server's
// database through it: serverDSN with the proxy's address.
func faultProxy(t testing.TB) (*mariaserver.Proxy, string) {
	t.Helper()
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		t.Fatal(err)
	}
	proxy := mariaserver.NewProxy(t, &mariaserver.Server{Addr: cfg.Addr})
	cfg.Addr = proxy.Addr
	return proxy, cfg.FormatDSN()
}

// faultDB opens dsn (a proxy's), closed when t ends.
func faultDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// faultStore is a store whose pool goes through a proxy of its own, on a
// table shared by the fault tests, with the effects read directly: a
// sqlfaults.NewStore.
func faultStore(t *testing.T) (store.Transactor, *sqlproxy.Proxy, storetest.Effects) {
	t.Helper()
	direct := newDB(t, plainParams)
	newTable(t, direct, "faults")
	proxy, dsn := faultProxy(t)
	return New(faultDB(t, dsn), "faults"), proxy, newEffects(t, direct)
}

// The COMMIT-fault tests are sqlfaults', shared with pgstore; each runs
// here on MariaDB through faultStore.

// TestFaultLostCommitAnswerIsRecognised: sqlfaults.LostCommitAnswerIsRecognised.
func TestFaultLostCommitAnswerIsRecognised(t *testing.T) {
	sqlfaults.LostCommitAnswerIsRecognised(t, faultStore)
}

// TestFaultDroppedBeforeCommitIsNotCommitted: sqlfaults.DroppedBeforeCommitIsNotCommitted.
func TestFaultDroppedBeforeCommitIsNotCommitted(t *testing.T) {
	sqlfaults.DroppedBeforeCommitIsNotCommitted(t, faultStore)
}

// TestFaultUnsettledCommitReadsAgain: sqlfaults.UnsettledCommitReadsAgain.
func TestFaultUnsettledCommitReadsAgain(t *testing.T) {
	sqlfaults.UnsettledCommitReadsAgain(t, faultStore)
}
