//go:build integration

package pgstore_test

import (
	"testing"

	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/storetest"
)

// TestStoreOnPostgres: the store passes the conformance suite on
// PostgreSQL 15, every rule on one table (the rules keep to ids of their
// own).
func TestStoreOnPostgres(t *testing.T) {
	pool := newPool(t, "")
	s := newTable(t, pool, "conformance")
	storetest.TestStore(t, func(t *testing.T) store.Store { return s })
}
