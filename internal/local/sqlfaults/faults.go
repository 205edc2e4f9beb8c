package sqlfaults

import (
	"errors"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/internal/local/sqlproxy"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/storetest"
)

// NewStore makes a store for one fault test: its connections go through
// the returned proxy (of its own, closed when t ends), its table shared by
// the fault tests (ids begin with "faults#"), and the effects are read
// directly, not through the proxy, so that a fault does not hide them.
type NewStore func(t *testing.T) (store.Transactor, *sqlproxy.Proxy, storetest.Effects)

func acquire(t *testing.T, s store.Store, id, owner string, now time.Time) store.Lease {
	t.Helper()
	lease, err := s.Acquire(t.Context(), store.AcquireRequest{ID: id, Owner: owner, Now: now, LockUntil: now.Add(time.Minute)})
	if err != nil {
		t.Fatalf("Acquire %s: %v", id, err)
	}
	return lease
}

func count(t *testing.T, e storetest.Effects, name string) int {
	t.Helper()
	n, err := e.Count(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// begin takes a lock on a new id of the kind's ("faults#<kind>-<now>"),
// as "owner-a", and adds one effect of the id's name in its transaction:
// each fault test starts from that, its effect not yet committed.
func begin(t *testing.T, s store.Transactor, e storetest.Effects, kind string) (now time.Time, name, id string, lease store.Lease, tx store.Tx) {
	t.Helper()
	now = time.Now().Truncate(time.Millisecond)
	name = kind + "-" + now.String()
	id = "faults#" + name
	lease = acquire(t, s, id, "owner-a", now)
	tx = s.Begin(lease)
	if err := e.Add(t.Context(), tx, name, false); err != nil {
		t.Fatal(err)
	}
	return now, name, id, lease, tx
}

// LostCommitAnswerIsRecognised: the COMMIT reaches the server, which
// commits, and the connection drops before its answer: Commit reads the
// record, finds its own completion and returns nil; the effect is there
// once, and a repeat of Commit applies nothing more.
func LostCommitAnswerIsRecognised(t *testing.T, newStore NewStore) {
	s, proxy, e := newStore(t)
	now, name, id, lease, tx := begin(t, s, e, "lost")
	proxy.Arm(sqlproxy.LoseCommitAnswer)
	if err := tx.Commit(t.Context(), store.Completion{Until: now.Add(time.Hour), Result: []byte("r"), Outbox: []byte("o")}); err != nil {
		t.Fatalf("Commit whose answer was lost returned %v; want nil (the record shows the commit applied)", err)
	}
	if proxy.Applied() != 1 {
		t.Fatalf("the proxy lost %d COMMIT answers; want 1: the test proves nothing", proxy.Applied())
	}
	if n := count(t, e, name); n != 1 {
		t.Errorf("after a commit whose answer was lost the effect is there %d times; want 1", n)
	}
	rec, err := s.Read(t.Context(), id)
	if err != nil || rec.Status != store.StatusCompleted || rec.Fence != lease.Fence || string(rec.Result) != "r" || string(rec.Outbox) != "o" {
		t.Errorf("the record after the commit is %v, result %q, outbox %q (%v); want COMPLETED with fence %d, the result and the outbox", rec, rec.Result, rec.Outbox, err, lease.Fence)
	}
	if err := tx.Commit(t.Context(), store.Completion{Until: now.Add(time.Hour), Result: []byte("r"), Outbox: []byte("o")}); err != nil {
		t.Errorf("a repeat of the recognised Commit returned %v; want nil", err)
	}
	if n := count(t, e, name); n != 1 {
		t.Errorf("after a repeated Commit the effect is there %d times; want 1", n)
	}
}

// DroppedBeforeCommitIsNotCommitted: the connection drops before the
// COMMIT reaches the server: ErrNotCommitted, no effect, the lock still
// the lease's; released and taken again, the work commits once.
func DroppedBeforeCommitIsNotCommitted(t *testing.T, newStore NewStore) {
	s, proxy, e := newStore(t)
	now, name, id, lease, tx := begin(t, s, e, "dropped")
	proxy.Arm(sqlproxy.DropBeforeCommit)
	err := tx.Commit(t.Context(), store.Completion{Until: now.Add(time.Hour)})
	if !errors.Is(err, store.ErrNotCommitted) {
		t.Fatalf("Commit whose connection dropped before COMMIT returned %v; want ErrNotCommitted", err)
	}
	if proxy.Applied() != 1 {
		t.Fatalf("the proxy dropped %d COMMITs; want 1", proxy.Applied())
	}
	if n := count(t, e, name); n != 0 {
		t.Errorf("the effect of a transaction never committed is there %d times; want 0", n)
	}
	if rec, err := s.Read(t.Context(), id); err != nil || rec.Status != store.StatusProcessing || rec.Owner != lease.Owner {
		t.Errorf("the record is %v (%v); want still the lease's lock", rec, err)
	}
	if err := tx.Commit(t.Context(), store.Completion{Until: now.Add(time.Hour)}); !errors.Is(err, store.ErrNotCommitted) {
		t.Errorf("a repeat of the Commit returned %v; want ErrNotCommitted again", err)
	}
	if err := s.Release(t.Context(), lease, now); err != nil {
		t.Fatal(err)
	}
	again := acquire(t, s, id, "owner-b", now.Add(time.Second))
	tx2 := s.Begin(again)
	if err := e.Add(t.Context(), tx2, name, false); err != nil {
		t.Fatal(err)
	}
	if err := tx2.Commit(t.Context(), store.Completion{Until: now.Add(time.Hour)}); err != nil {
		t.Fatalf("the retry's Commit: %v", err)
	}
	if n := count(t, e, name); n != 1 {
		t.Errorf("after the retry the effect is there %d times; want 1", n)
	}
}

// UnsettledCommitReadsAgain: the COMMIT's answer is lost and the
// record cannot be read (the database unreachable): Commit returns an
// error matching ErrUnavailable, neither ErrNotCommitted nor ErrLockLost
// (the outcome is unknown; it was in fact committed); once the database
// answers again, a repeat of Commit only reads the record and returns nil,
// and the effect is there once.
func UnsettledCommitReadsAgain(t *testing.T, newStore NewStore) {
	s, proxy, e := newStore(t)
	now, name, _, _, tx := begin(t, s, e, "unsettled")
	proxy.Arm(sqlproxy.LoseCommitAnswerAndCrash)
	err := tx.Commit(t.Context(), store.Completion{Until: now.Add(time.Hour)})
	if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrNotCommitted) || errors.Is(err, store.ErrLockLost) {
		t.Fatalf("Commit whose answer was lost, the record unreadable, returned %v; want ErrUnavailable alone (the outcome unknown)", err)
	}
	if proxy.Applied() != 1 {
		t.Fatalf("the proxy applied %d faults; want 1", proxy.Applied())
	}
	if n := count(t, e, name); n != 1 {
		t.Fatalf("the commit applied the effect %d times; want 1 (the COMMIT reached the server)", n)
	}
	proxy.Recover()
	if err := tx.Commit(t.Context(), store.Completion{Until: now.Add(time.Hour)}); err != nil {
		t.Errorf("the repeat of Commit, the database answering again, returned %v; want nil (the record shows its completion)", err)
	}
	if n := count(t, e, name); n != 1 {
		t.Errorf("after the repeat the effect is there %d times; want 1", n)
	}
}
