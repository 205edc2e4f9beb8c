//go:build integration

package pgstore_test

import (
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/internal/local/pgserver"
	"github.com/sqs-once/sqs-once/internal/local/sqlfaults"
	"github.com/sqs-once/sqs-once/internal/local/sqlproxy"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/pgstore"
	"github.com/sqs-once/sqs-once/sqsonce/store/storetest"
)

// faultStore is a store whose pool goes through a proxy of its own, on a
// table shared by the fault tests, with the effects read directly: a
// sqlfaults.NewStore.
func faultStore(t *testing.T) (store.Transactor, *sqlproxy.Proxy, storetest.Effects) {
	t.Helper()
	direct := newPool(t, "")
	newTable(t, direct, "faults")
	proxy := pgserver.NewProxy(t, server)
	return pgstore.New(newPool(t, proxy.DSN), "faults"), proxy, newEffects(t, direct)
}

func acquire(t *testing.T, s store.Store, id, owner string, now time.Time) store.Lease {
	t.Helper()
	lease, err := s.Acquire(t.Context(), store.AcquireRequest{ID: id, Owner: owner, Now: now, LockUntil: now.Add(time.Minute)})
	if err != nil {
		t.Fatalf("Acquire %s: %v", id, err)
	}
	return lease
}

func count(t *testing.T, e effects, name string) int {
	t.Helper()
	n, err := e.Count(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The COMMIT-fault tests are sqlfaults', shared with mysqlstore; each
// runs here on PostgreSQL through faultStore.

// TestLostCommitAnswerIsRecognised: sqlfaults.LostCommitAnswerIsRecognised.
func TestLostCommitAnswerIsRecognised(t *testing.T) {
	sqlfaults.LostCommitAnswerIsRecognised(t, faultStore)
}

// TestDroppedBeforeCommitIsNotCommitted: sqlfaults.DroppedBeforeCommitIsNotCommitted.
func TestDroppedBeforeCommitIsNotCommitted(t *testing.T) {
	sqlfaults.DroppedBeforeCommitIsNotCommitted(t, faultStore)
}

// TestUnsettledCommitReadsAgain: sqlfaults.UnsettledCommitReadsAgain.
func TestUnsettledCommitReadsAgain(t *testing.T) {
	sqlfaults.UnsettledCommitReadsAgain(t, faultStore)
}
