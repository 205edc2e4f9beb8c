//go:build integration

package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/pgstore"
)

// TestCreateTableTwiceAndCheck: CreateTable is idempotent, and Check
// passes on its table, schema-qualified too.
func TestCreateTableTwiceAndCheck(t *testing.T) {
	pool := newPool(t, "")
	if _, err := pool.Exec(t.Context(), `CREATE SCHEMA IF NOT EXISTS idem`); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"created_twice", "idem.records"} {
		for range 2 {
			if err := pgstore.CreateTable(t.Context(), pool, name); err != nil {
				t.Fatalf("CreateTable(%q): %v", name, err)
			}
		}
		if err := pgstore.New(pool, name).Check(t.Context()); err != nil {
			t.Errorf("Check on the table CreateTable made (%q): %v", name, err)
		}
	}
	var idx int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_indexes WHERE tablename = 'created_twice' AND indexdef LIKE '%(expires_at)%'`).Scan(&idx); err != nil || idx != 1 {
		t.Errorf("%d indexes on expires_at (%v); want the sweep's one", idx, err)
	}
}

// TestCheckSaysWhatIsWrong: a missing table, a column missing or of
// another type, another primary key, a NOT NULL column the store does not
// write: ErrMisconfigured naming the problem, with the DDL; a server that
// does not answer: ErrUnavailable. (A table that lacks the outbox column
// alone, an earlier version's: TestMigrateTableWithoutOutbox.)
func TestCheckSaysWhatIsWrong(t *testing.T) {
	pool := newPool(t, "")
	for _, c := range []struct {
		table, ddl, want string
	}{
		{"check_missing", "", "does not exist"},
		{"check_no_result", `CREATE TABLE check_no_result (id text PRIMARY KEY, status text NOT NULL, owner text NOT NULL, fence bigint NOT NULL, lock_expires_at bigint, expires_at bigint NOT NULL, payload_hash text NOT NULL DEFAULT '')`, "no column result (bytea)"},
		{"check_int_fence", `CREATE TABLE check_int_fence (id text PRIMARY KEY, status text NOT NULL, owner text NOT NULL, fence integer NOT NULL, lock_expires_at bigint, expires_at bigint NOT NULL, payload_hash text NOT NULL DEFAULT '', result bytea, outbox bytea)`, "column fence is integer, not bigint"},
		{"check_pk", `CREATE TABLE check_pk (id text, status text NOT NULL, owner text NOT NULL, fence bigint NOT NULL, lock_expires_at bigint, expires_at bigint NOT NULL, payload_hash text NOT NULL DEFAULT '', result bytea, outbox bytea, PRIMARY KEY (id, owner))`, "the primary key is not (id)"},
		{"check_extra", `CREATE TABLE check_extra (id text PRIMARY KEY, status text NOT NULL, owner text NOT NULL, fence bigint NOT NULL, lock_expires_at bigint, expires_at bigint NOT NULL, payload_hash text NOT NULL DEFAULT '', result bytea, outbox bytea, tenant text NOT NULL)`, "column tenant is NOT NULL without a default"},
		{"check_outbox_text", `CREATE TABLE check_outbox_text (id text PRIMARY KEY, status text NOT NULL, owner text NOT NULL, fence bigint NOT NULL, lock_expires_at bigint, expires_at bigint NOT NULL, payload_hash text NOT NULL DEFAULT '', result bytea, outbox text)`, "column outbox is text, not bytea"},
		// Without outbox and with another problem: not the table of an
		// earlier version, so the whole DDL (which adds outbox too).
		{"check_old_int_fence", `CREATE TABLE check_old_int_fence (id text PRIMARY KEY, status text NOT NULL, owner text NOT NULL, fence integer NOT NULL, lock_expires_at bigint, expires_at bigint NOT NULL, payload_hash text NOT NULL DEFAULT '', result bytea)`, "column fence is integer, not bigint; no column outbox (bytea)"},
	} {
		if c.ddl != "" {
			if _, err := pool.Exec(t.Context(), `DROP TABLE IF EXISTS `+c.table); err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(t.Context(), c.ddl); err != nil {
				t.Fatal(err)
			}
		}
		err := pgstore.New(pool, c.table).Check(t.Context())
		if !errors.Is(err, store.ErrMisconfigured) || errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "CREATE TABLE IF NOT EXISTS") {
			t.Errorf("Check on %s returned %v; want ErrMisconfigured alone, saying %q and giving the DDL", c.table, err, c.want)
		}
	}
	down := newPool(t, "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=5")
	if err := pgstore.New(down, "x").Check(t.Context()); !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrMisconfigured) {
		t.Errorf("Check on a server that does not answer returned %v; want ErrUnavailable alone", err)
	}
}

// TestErrorsOnAMissingTable: every method on a table that does not exist
// is a *store.StoreError matching ErrMisconfigured alone, unwrapping to
// the *pgconn.PgError (42P01), and gives the fix; on a server that does
// not answer, ErrUnavailable alone.
func TestErrorsOnAMissingTable(t *testing.T) {
	s := pgstore.New(newPool(t, ""), "no_such_records")
	now := time.Now()
	_, err := s.Acquire(t.Context(), store.AcquireRequest{ID: "p#k", Owner: "o", Now: now, LockUntil: now.Add(time.Minute)})
	var se *store.StoreError
	var pg *pgconn.PgError
	if !errors.As(err, &se) || !errors.Is(err, store.ErrMisconfigured) || errors.Is(err, store.ErrUnavailable) || !errors.As(err, &pg) || pg.Code != "42P01" || !strings.Contains(err.Error(), "pgstore.CreateTable") {
		t.Errorf("Acquire on a missing table returned %v; want a StoreError matching ErrMisconfigured alone, with the PgError 42P01 and the fix", err)
	}
	if _, err := s.Read(t.Context(), "p#k"); !errors.Is(err, store.ErrMisconfigured) {
		t.Errorf("Read on a missing table returned %v; want ErrMisconfigured", err)
	}
	down := pgstore.New(newPool(t, "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=5"), "x")
	if _, err := down.Acquire(t.Context(), store.AcquireRequest{ID: "p#k", Owner: "o", Now: now, LockUntil: now.Add(time.Minute)}); !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrMisconfigured) {
		t.Errorf("Acquire on a server that does not answer returned %v; want ErrUnavailable alone", err)
	}
}

// TestForeignRecords: a row the protocol did not write (a status of its
// own, a lock without an expiry) is a *store.RecordError from Read and
// Acquire, with the row as far as it reads, and is left alone.
func TestForeignRecords(t *testing.T) {
	pool := newPool(t, "")
	s := newTable(t, pool, "foreign_records")
	now := time.Now()
	future := now.Add(time.Hour).Unix()
	for id, ins := range map[string]string{
		"p#status": `INSERT INTO foreign_records (id, status, owner, fence, expires_at) VALUES ($1, 'DONE', 'someone', 3, $2) ON CONFLICT (id) DO NOTHING`,
		"p#nolock": `INSERT INTO foreign_records (id, status, owner, fence, expires_at) VALUES ($1, 'PROCESSING', 'someone', 3, $2) ON CONFLICT (id) DO NOTHING`,
	} {
		if _, err := pool.Exec(t.Context(), ins, id, future); err != nil {
			t.Fatal(err)
		}
		var re *store.RecordError
		rec, err := s.Read(t.Context(), id)
		if !errors.As(err, &re) || !errors.Is(err, store.ErrMisconfigured) || rec.Owner != "someone" || rec.Fence != 3 {
			t.Errorf("Read of %s returned %v, %v; want a RecordError with the row as far as it reads", id, rec, err)
		}
		if _, err := s.Acquire(t.Context(), store.AcquireRequest{ID: id, Owner: "o", Now: now, LockUntil: now.Add(time.Minute)}); !errors.As(err, &re) {
			t.Errorf("Acquire of %s returned %v; want a RecordError", id, err)
		}
		var owner string
		if err := pool.QueryRow(t.Context(), `SELECT owner FROM foreign_records WHERE id = $1`, id).Scan(&owner); err != nil || owner != "someone" {
			t.Errorf("the foreign row %s changed: owner %q (%v)", id, owner, err)
		}
	}
}

// TestSweep: records past their ExpiresAt count as absent (Read, Acquire
// as a new record) and Sweep deletes them, in batches, up to its limit;
// the rest stay.
func TestSweep(t *testing.T) {
	pool := newPool(t, "")
	s := newTable(t, pool, "sweep_records")
	if _, err := pool.Exec(t.Context(), `TRUNCATE sweep_records`); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond)
	// Locks taken two hours ago for a minute: their records (kept an hour
	// past the lock) expired about an hour ago.
	old := now.Add(-2 * time.Hour)
	for i := range 5 {
		acquire(t, s, "p#old-"+string(rune('a'+i)), "o", old)
	}
	live := acquire(t, s, "p#live", "o", now)
	done := acquire(t, s, "p#done", "o", now)
	if err := s.Complete(ctx, done, store.Completion{Until: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(ctx, "p#old-a"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Read of a record past its ExpiresAt returned %v; want ErrNotFound (as TTL would have deleted it)", err)
	}
	n, err := s.Sweep(ctx, now, 3)
	if err != nil || n != 3 {
		t.Fatalf("Sweep with limit 3 deleted %d (%v); want 3", n, err)
	}
	n, err = s.Sweep(ctx, now, 100)
	if err != nil || n != 2 {
		t.Fatalf("the next Sweep deleted %d (%v); want the 2 left", n, err)
	}
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM sweep_records`).Scan(&left); err != nil || left != 2 {
		t.Errorf("%d records left (%v); want the live lock and the completion", left, err)
	}
	if rec, err := s.Read(ctx, "p#live"); err != nil || rec.Fence != live.Fence {
		t.Errorf("the live lock after Sweep: %v, %v", rec, err)
	}
	// The window's last second is kept: swept only once it is before now.
	end := time.Unix(now.Add(time.Minute).Unix(), 0)
	if n, err := s.Sweep(ctx, end, 100); err != nil || n != 0 {
		t.Errorf("Sweep at the window's end deleted %d (%v); want 0", n, err)
	}
	if n, err := s.Sweep(ctx, end.Add(time.Second), 100); err != nil || n != 1 {
		t.Errorf("Sweep a second after the window deleted %d (%v); want the completion", n, err)
	}
}

// TestTxOutsideSqsonce: Tx without a transaction in the context is
// ErrNoTx; the work's pgx.Tx refuses Commit (sqsonce commits it) and its
// Rollback does nothing, so `defer tx.Rollback(ctx)` keeps the writes for
// the completion.
func TestTxOutsideSqsonce(t *testing.T) {
	if _, err := pgstore.Tx(context.Background()); !errors.Is(err, pgstore.ErrNoTx) {
		t.Errorf("Tx of a context without a transaction returned %v; want ErrNoTx", err)
	}
	pool := newPool(t, "")
	s := newTable(t, pool, "tx_records")
	e := newEffects(t, pool)
	now := time.Now().Truncate(time.Millisecond)
	name := "rollback-" + now.String()
	lease := acquire(t, s, "p#"+name, "o", now)
	tx := s.Begin(lease)
	if !tx.Empty() {
		t.Error("a transaction begun is not Empty")
	}
	ctx := store.ContextWithTx(t.Context(), tx)
	ptx, err := pgstore.Tx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tx.Empty() {
		t.Error("after Tx the transaction is Empty")
	}
	if err := e.Add(t.Context(), tx, name, false); err != nil {
		t.Fatal(err)
	}
	if err := ptx.Commit(ctx); err == nil {
		t.Error("the work's Commit of its pgx.Tx succeeded; want an error (sqsonce commits it)")
	}
	if err := ptx.Rollback(ctx); err != nil {
		t.Errorf("the work's Rollback: %v; want nil, and nothing done", err)
	}
	if err := tx.Commit(t.Context(), store.Completion{Until: now.Add(time.Hour)}); err != nil {
		t.Fatalf("Commit after the work's own Commit and Rollback: %v", err)
	}
	if n := count(t, e, name); n != 1 {
		t.Errorf("the effect is there %d times; want 1", n)
	}
}

// TestWorkStatementFailed: a work whose own statement failed (and
// aborted its transaction) and that returned nil anyway commits nothing:
// a *store.EffectError, the lock still the lease's.
func TestWorkStatementFailed(t *testing.T) {
	pool := newPool(t, "")
	s := newTable(t, pool, "tx_records")
	e := newEffects(t, pool)
	now := time.Now().Truncate(time.Millisecond)
	name := "aborted-" + now.String()
	lease := acquire(t, s, "p#"+name, "o", now)
	tx := s.Begin(lease)
	if err := e.Add(t.Context(), tx, name, false); err != nil {
		t.Fatal(err)
	}
	ptx, err := pgstore.Tx(store.ContextWithTx(t.Context(), tx))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ptx.Exec(t.Context(), `SELECT 1/0`); err == nil {
		t.Fatal("division by zero succeeded")
	}
	var ee *store.EffectError
	if err := tx.Commit(t.Context(), store.Completion{Until: now.Add(time.Hour)}); !errors.As(err, &ee) {
		t.Errorf("Commit after the work's statement failed returned %v; want a *store.EffectError", err)
	}
	if n := count(t, e, name); n != 0 {
		t.Errorf("the effect is there %d times; want 0", n)
	}
	if rec, err := s.Read(t.Context(), "p#"+name); err != nil || rec.Status != store.StatusProcessing {
		t.Errorf("the record is %v (%v); want still the lease's lock", rec, err)
	}
}

// TestTableDocSQLPassesCheck: the page's SQL, run as a reader runs it,
// makes a table Check accepts and the store works on.
func TestTableDocSQLPassesCheck(t *testing.T) {
	pool := newPool(t, "")
	if _, err := pool.Exec(t.Context(), docDDL(t)); err != nil {
		t.Fatalf("%s's SQL: %v", pgDoc, err)
	}
	s := pgstore.New(pool, "sqs_once_records")
	if err := s.Check(t.Context()); err != nil {
		t.Errorf("Check on the table of %s's SQL: %v", pgDoc, err)
	}
	now := time.Now()
	acquire(t, s, "doc#"+now.String(), "o", now)
}
