//go:build integration

package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sqs-once/sqs-once/internal/local/sqlfaults"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/pgstore"
)

// txOf acquires id on s and returns its lease, its transaction and a
// context carrying it, as sqsonce hands them to a work.
func txOf(t *testing.T, s *pgstore.Store, id string) (store.Lease, store.Tx, context.Context) {
	t.Helper()
	now := time.Now()
	lease, err := s.Acquire(t.Context(), store.AcquireRequest{ID: id, Owner: "owner-" + id, Now: now, LockUntil: now.Add(sqlfaults.LockFor)})
	if err != nil {
		t.Fatal(err)
	}
	tx := s.Begin(lease)
	return lease, tx, store.ContextWithTx(t.Context(), tx)
}

// TestBeginTxOptions: the work's transaction begins with the options the
// work passes (SHOW transaction_isolation reads them back), a later
// BeginTx with other ones is refused while Tx returns the transaction as
// it is, and the commit applies the work's write with the completion.
func TestBeginTxOptions(t *testing.T) {
	pool := newPool(t, "")
	s := newTable(t, pool, "txopts_records")
	ordersTable(t, pool, "txopts_orders")
	id := "orders#opts-" + time.Now().Format(time.RFC3339Nano)
	_, tx, ctx := txOf(t, s, id)
	ptx, err := pgstore.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	var level string
	if err := ptx.QueryRow(ctx, "SHOW transaction_isolation").Scan(&level); err != nil || level != "repeatable read" {
		t.Fatalf("transaction_isolation %q (%v); want repeatable read", level, err)
	}
	if _, err := pgstore.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable}); err == nil {
		t.Error("BeginTx with other options after the transaction began succeeded; want refused")
	}
	again, err := pgstore.Tx(ctx)
	if err != nil {
		t.Fatalf("Tx after BeginTx: %v; want the transaction as it is", err)
	}
	if _, err := again.Exec(ctx, `INSERT INTO txopts_orders (key) VALUES ($1)`, id); err != nil {
		t.Fatal(err)
	}
	tx.Seal()
	if err := tx.Commit(ctx, store.Completion{Until: time.Now().Add(time.Hour)}); err != nil {
		t.Fatalf("Commit under repeatable read with no renewal: %v", err)
	}
	if n := orders(t, pool, "txopts_orders")[id]; n != 1 {
		t.Errorf("%d order rows, want 1", n)
	}
}

// TestRepeatableReadAfterARenewalIsNotCommitted: what docs say of
// RepeatableRead: a renewal of the lock (an UPDATE of the record's row on
// the pool) after the work's first statement makes the completion's
// UPDATE a serialization failure (40001): Commit says not committed,
// nothing of the work is applied, and the lock can be released for the
// work to run again. Under ReadCommitted the same renewal commits.
func TestRepeatableReadAfterARenewalIsNotCommitted(t *testing.T) {
	pool := newPool(t, "")
	s := newTable(t, pool, "txrenew_records")
	ordersTable(t, pool, "txrenew_orders")
	for _, c := range []struct {
		level     pgx.TxIsoLevel
		committed bool
	}{{pgx.RepeatableRead, false}, {pgx.Serializable, false}, {pgx.ReadCommitted, true}} {
		t.Run(string(c.level), func(t *testing.T) {
			id := "orders#renew-" + string(c.level) + "-" + time.Now().Format(time.RFC3339Nano)
			lease, tx, ctx := txOf(t, s, id)
			ptx, err := pgstore.BeginTx(ctx, pgx.TxOptions{IsoLevel: c.level})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ptx.Exec(ctx, `INSERT INTO txrenew_orders (key) VALUES ($1)`, id); err != nil {
				t.Fatal(err)
			}
			renewed, err := s.Renew(t.Context(), lease, time.Now().Add(2*sqlfaults.LockFor))
			if err != nil {
				t.Fatal(err)
			}
			tx.Seal()
			err = tx.Commit(ctx, store.Completion{Until: time.Now().Add(time.Hour)})
			if c.committed {
				if err != nil {
					t.Fatalf("Commit under %s after a renewal: %v; want committed", c.level, err)
				}
				if n := orders(t, pool, "txrenew_orders")[id]; n != 1 {
					t.Errorf("%d order rows, want 1", n)
				}
				return
			}
			if !errors.Is(err, store.ErrNotCommitted) {
				t.Fatalf("Commit under %s after a renewal: %v; want an error matching store.ErrNotCommitted (a serialization failure, nothing applied)", c.level, err)
			}
			if n := orders(t, pool, "txrenew_orders")[id]; n != 0 {
				t.Errorf("%d order rows, want none", n)
			}
			if err := s.Release(t.Context(), renewed, time.Now()); err != nil {
				t.Errorf("Release after the refused commit: %v; the lock is still the lease's", err)
			}
		})
	}
}

// TestHeldTxAfterSealIsRefused: a goroutine that kept the pgx.Tx (or a
// savepoint of it) the work got, and uses it after the work returned, gets
// store.ErrTxEnded from every statement; the commit applies the work's
// own write alone.
func TestHeldTxAfterSealIsRefused(t *testing.T) {
	pool := newPool(t, "")
	s := newTable(t, pool, "txseal_records")
	ordersTable(t, pool, "txseal_orders")
	id := "orders#seal-" + time.Now().Format(time.RFC3339Nano)
	_, tx, ctx := txOf(t, s, id)
	ptx, err := pgstore.Tx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	insert := `INSERT INTO txseal_orders (key) VALUES ($1)`
	if _, err := ptx.Exec(ctx, insert, id); err != nil {
		t.Fatal(err)
	}
	sp, err := ptx.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Commit(ctx); err != nil {
		t.Fatalf("releasing a savepoint: %v", err)
	}
	sp2, err := ptx.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx.Seal()
	if _, err := ptx.Exec(ctx, insert, id); !errors.Is(err, store.ErrTxEnded) {
		t.Errorf("Exec on the held pgx.Tx after the seal: %v; want store.ErrTxEnded", err)
	}
	if _, err := sp2.Exec(ctx, insert, id); !errors.Is(err, store.ErrTxEnded) {
		t.Errorf("Exec on a savepoint after the seal: %v; want store.ErrTxEnded", err)
	}
	var n int
	if err := ptx.QueryRow(ctx, "SELECT 1").Scan(&n); !errors.Is(err, store.ErrTxEnded) {
		t.Errorf("QueryRow after the seal: %v; want store.ErrTxEnded", err)
	}
	if _, err := pgstore.Tx(ctx); !errors.Is(err, store.ErrTxEnded) {
		t.Errorf("Tx after the seal: %v; want store.ErrTxEnded", err)
	}
	if err := tx.Commit(ctx, store.Completion{Until: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if n := orders(t, pool, "txseal_orders")[id]; n != 1 {
		t.Errorf("%d order rows, want 1 (the work's; the late ones refused)", n)
	}
}
