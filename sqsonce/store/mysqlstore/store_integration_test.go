//go:build integration

package mysqlstore_test

import (
	"testing"

	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/storetest"
)

// TestStoreOnMariaDB: the store passes the conformance suite on MariaDB
// 10.11, on a connection without any DSN parameter (rows-affected counts
// changed rows) and on one with clientFoundRows, parseTime, loc and a
// session time zone of their own: what the user's DSN says changes
// nothing.
func TestStoreOnMariaDB(t *testing.T) {
	for _, dsn := range []struct{ name, params string }{{"plain", plainParams}, {"clientFoundRows", foundParams}} {
		t.Run(dsn.name, func(t *testing.T) {
			db := newDB(t, dsn.params)
			s := newTable(t, db, "conformance_"+dsn.name)
			storetest.TestStore(t, func(t *testing.T) store.Store { return s })
		})
	}
}
