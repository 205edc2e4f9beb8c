//go:build integration

package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql" // also the "mysql" driver of database/sql

	"github.com/sqs-once/sqs-once/internal/local/mariaserver"
)

// dsnEnv passes the server's DSN to a child process of this test binary
// (the mutant tests'), which then starts no server of its own.
const dsnEnv = "MYSQLSTORE_TEST_DSN"

// serverDSN is the DSN of this test binary's MariaDB
// (internal/local/mariaserver), without parameters: its database sqsonce
// as root.
var serverDSN string

func TestMain(m *testing.M) {
	// The driver logs each connection the fault tests' proxy drops
	// ("unexpected EOF"): the faults are the tests', not news.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	if dsn := os.Getenv(dsnEnv); dsn != "" {
		serverDSN = dsn
		os.Exit(m.Run())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	srv, err := mariaserver.Start(ctx, mariaserver.Options{})
	cancel()
	if err != nil {
		// Never skipped: the tier needs the server, and says how to get it.
		fmt.Fprintln(os.Stderr, "mysqlstore tests:", err)
		os.Exit(1)
	}
	serverDSN = srv.DSN
	code := m.Run()
	srv.Stop()
	os.Exit(code)
}

// The DSNs the tests open: the server's as it comes (no parameter:
// rows-affected counts changed rows, times as []byte), and one with every
// parameter a user may set that changes what the driver returns or the
// session computes: clientFoundRows (matched rows), parseTime and loc (a
// DATETIME as a time.Time in another zone), the session's time zone, and
// interpolateParams (arguments written into the SQL text by the driver,
// where the plain DSN sends them in prepared statements).
const (
	plainParams = ""
	foundParams = "clientFoundRows=true&parseTime=true&loc=Asia%2FTokyo&time_zone=%27%2B09%3A00%27&interpolateParams=true"
)

// newDB opens the test server's database with params (a DSN's query,
// without the "?"), closed when t ends.
func newDB(t testing.TB, params string) *sql.DB {
	t.Helper()
	dsn := serverDSN
	if params != "" {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += sep + params
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// newTable creates a table of the store's under a name of the test's own
// (dropped first, so that a run starts from an empty one) and returns the
// store on it.
func newTable(t testing.TB, db *sql.DB, name string) *Store {
	t.Helper()
	if _, err := db.ExecContext(t.Context(), "DROP TABLE IF EXISTS `"+name+"`"); err != nil {
		t.Fatal(err)
	}
	if err := CreateTable(t.Context(), db, name); err != nil {
		t.Fatal(err)
	}
	return New(db, name)
}
