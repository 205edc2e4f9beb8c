//go:build integration

package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/pgstore"
	"github.com/sqs-once/sqs-once/sqsonce/store/storetest"
)

// oldTable creates table (a plain name, or schema.name) as the versions
// before the outbox column did, with a completion in it, and returns the
// completion's id.
func oldTable(t *testing.T, pool *pgxpool.Pool, table string) string {
	t.Helper()
	index := table[strings.LastIndex(table, ".")+1:] + "_expires_at"
	for _, q := range []string{
		`DROP TABLE IF EXISTS ` + table,
		// TableDDL before the outbox column, verbatim.
		`CREATE TABLE IF NOT EXISTS ` + table + ` (
  id              text PRIMARY KEY,  -- "<key prefix>#<key>"
  status          text NOT NULL,     -- PROCESSING, COMPLETED or RELEASED
  owner           text NOT NULL,     -- the acquisition's owner token
  fence           bigint NOT NULL,   -- the fencing token
  lock_expires_at bigint,            -- a lock's expiry, epoch milliseconds
  expires_at      bigint NOT NULL,   -- when Sweep may delete the record, epoch seconds
  payload_hash    text NOT NULL DEFAULT '',
  result          bytea              -- the work's result, NULL when none
)`,
		`CREATE INDEX IF NOT EXISTS ` + index + ` ON ` + table + ` (expires_at)`,
	} {
		if _, err := pool.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	id := "old#done"
	if _, err := pool.Exec(t.Context(), `INSERT INTO `+table+` (id, status, owner, fence, expires_at, result) VALUES ($1, 'COMPLETED', 'old-owner', 7, $2, '"r"')`, id, time.Now().Add(time.Hour).Unix()); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestMigrateTableWithoutOutbox: a table of an earlier version, without
// the outbox column, fails Check with the one ALTER TABLE that fixes it
// (and each statement of the store fails as misconfigured, pointing at
// it); that SQL, or CreateTable from several processes at once, adds the
// column; then Check passes, the old completion reads as it was, with no
// outbox, and the store passes both conformance suites on the table.
func TestMigrateTableWithoutOutbox(t *testing.T) {
	pool := newPool(t, "")
	if _, err := pool.Exec(t.Context(), `CREATE SCHEMA IF NOT EXISTS legacy`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		table, quoted string
		// bySQL: migrated by running the SQL Check gives; else by
		// CreateTable, from racing callers.
		bySQL bool
	}{
		{"old_by_sql", `"old_by_sql"`, true},
		{"legacy.old_by_create", `"legacy"."old_by_create"`, false},
	} {
		t.Run(c.table, func(t *testing.T) {
			ctx := t.Context()
			id := oldTable(t, pool, c.table)
			s := pgstore.New(pool, c.table)

			alter := `ALTER TABLE ` + c.quoted + ` ADD COLUMN IF NOT EXISTS outbox bytea;`
			err := s.Check(ctx)
			if !errors.Is(err, store.ErrMisconfigured) || errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("Check on a table without outbox returned %v; want ErrMisconfigured alone", err)
			}
			msg := err.Error()
			for _, want := range []string{"no column outbox (bytea)", "\n" + alter + "\n", `pgstore.CreateTable(ctx, pool, "` + c.table + `")`} {
				if !strings.Contains(msg, want) {
					t.Errorf("Check's error on a table without outbox lacks %q:\n%s", want, msg)
				}
			}
			if strings.Contains(msg, "CREATE TABLE") {
				t.Errorf("Check's error on a table that lacks only the outbox gives the whole DDL; want the ALTER TABLE alone:\n%s", msg)
			}

			// Before the migration every statement fails as misconfigured,
			// saying how to add the column.
			var pg *pgconn.PgError
			if _, err := s.Read(ctx, id); !errors.Is(err, store.ErrMisconfigured) || !errors.As(err, &pg) || pg.Code != "42703" || !strings.Contains(err.Error(), strings.TrimSuffix(alter, ";")) {
				t.Errorf("Read on a table without outbox returned %v; want ErrMisconfigured (42703) with the ALTER TABLE", err)
			}

			if c.bySQL {
				// The SQL is the message's last line: what an operator
				// copies.
				lines := strings.Split(strings.TrimSpace(msg), "\n")
				if _, err := pool.Exec(ctx, lines[len(lines)-1]); err != nil {
					t.Fatalf("the SQL of Check's error: %v", err)
				}
			} else {
				var wg sync.WaitGroup
				errs := make([]error, 8)
				for i := range errs {
					wg.Go(func() { errs[i] = pgstore.CreateTable(ctx, pool, c.table) })
				}
				wg.Wait()
				for i, err := range errs {
					if err != nil {
						t.Errorf("racing CreateTable %d on a table without outbox: %v", i, err)
					}
				}
			}
			if err := pgstore.CreateTable(ctx, pool, c.table); err != nil {
				t.Fatalf("CreateTable on the migrated table: %v", err)
			}
			if err := s.Check(ctx); err != nil {
				t.Fatalf("Check after the migration: %v", err)
			}
			rec, err := s.Read(ctx, id)
			if err != nil || rec.Status != store.StatusCompleted || rec.Owner != "old-owner" || rec.Fence != 7 || string(rec.Result) != `"r"` || rec.Outbox != nil {
				t.Fatalf("the old completion after the migration reads %v, result %q, outbox %q (%v); want it as it was, with no outbox", rec, rec.Result, rec.Outbox, err)
			}
			if err := s.MarkSent(ctx, rec); err != nil {
				t.Errorf("MarkSent of the old completion (no outbox): %v; want nil", err)
			}
			if again, err := s.Read(ctx, id); err != nil || string(again.Result) != `"r"` {
				t.Errorf("after MarkSent the old completion reads %v, result %q (%v); want the result kept", again, again.Result, err)
			}
			if err := s.Forget(ctx, rec); err != nil {
				t.Errorf("Forget of the old completion: %v", err)
			}

			storetest.TestStore(t, func(t *testing.T) store.Store { return s })
			e := newEffects(t, pool)
			storetest.TestTransactions(t, func(t *testing.T) (store.Transactor, storetest.Effects) { return s, e })
		})
	}
}

// TestCreateTableLeavesAnUpToDateTableAlone: on a table that has the
// outbox column, CreateTable does not run the ALTER TABLE, whose lock
// would wait for every transaction reading the table (and stop the
// store's statements behind it): it returns while a reader holds the
// table.
func TestCreateTableLeavesAnUpToDateTableAlone(t *testing.T) {
	pool := newPool(t, "")
	ctx := t.Context()
	newTable(t, pool, "up_to_date")
	reader, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Rollback(context.Background())
	if _, err := reader.Exec(ctx, `SELECT count(*) FROM up_to_date`); err != nil {
		t.Fatal(err)
	}
	// lock_timeout makes a statement that waits for the reader fail
	// instead of hanging the test.
	short := newPool(t, server.DSN+"&options=-c%20lock_timeout%3D2000")
	if err := pgstore.CreateTable(ctx, short, "up_to_date"); err != nil {
		t.Errorf("CreateTable on an up-to-date table while a transaction reads it: %v; want nil, at once", err)
	}
}

// TestMarkSentRacing: deliveries marking the same completion sent at once
// all succeed, the ones whose UPDATE found the outbox removed under them
// (by the first) reading the record again, and the result stays. A
// transaction holds the row until every MarkSent waits for it, so that
// they all start before the first applies.
func TestMarkSentRacing(t *testing.T) {
	const racers = 8
	pool := newPool(t, server.DSN+"&pool_max_conns=12")
	s := newTable(t, pool, "outbox_records")
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond)
	id := "p#race-" + now.String()
	lease := acquire(t, s, id, "o", now)
	if err := s.Complete(ctx, lease, store.Completion{Until: now.Add(time.Hour), Result: []byte("r"), Outbox: []byte("msgs")}); err != nil {
		t.Fatal(err)
	}
	done, err := s.Read(ctx, id)
	if err != nil || string(done.Outbox) != "msgs" {
		t.Fatalf("the completion reads %v, outbox %q (%v)", done, done.Outbox, err)
	}
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(context.Background())
	if _, err := holder.Exec(ctx, `SELECT 1 FROM outbox_records WHERE id = $1 FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, racers)
	for i := range errs {
		wg.Go(func() { errs[i] = s.MarkSent(ctx, done) })
	}
	deadline := time.Now().Add(30 * time.Second)
	for waiting := 0; waiting < racers; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of the %d MarkSent wait for the row after 30 s", waiting, racers)
		}
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'WITH w AS (UPDATE %' AND query LIKE '%SET outbox = NULL%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("racing MarkSent %d: %v; want nil", i, err)
		}
	}
	if rec, err := s.Read(ctx, id); err != nil || rec.Outbox != nil || string(rec.Result) != "r" || rec.Status != store.StatusCompleted {
		t.Errorf("after the racing MarkSent the record is %v, result %q, outbox %q (%v); want the completion with its result and no outbox", rec, rec.Result, rec.Outbox, err)
	}
}

// TestMarkSentRefusalIsRecordChanged: MarkSent of a completion the record
// no longer is (here, the key forgotten and locked again) is a
// *store.StoreError matching ErrRecordChanged, and writes nothing.
func TestMarkSentRefusalIsRecordChanged(t *testing.T) {
	pool := newPool(t, "")
	s := newTable(t, pool, "outbox_records")
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond)
	id := "p#changed-" + now.String()
	lease := acquire(t, s, id, "a", now)
	if err := s.Complete(ctx, lease, store.Completion{Until: now.Add(time.Hour), Outbox: []byte("a's")}); err != nil {
		t.Fatal(err)
	}
	done, err := s.Read(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(ctx, done); err != nil {
		t.Fatal(err)
	}
	next := acquire(t, s, id, "b", now.Add(time.Second))
	if err := s.Complete(ctx, next, store.Completion{Until: now.Add(time.Hour), Outbox: []byte("b's")}); err != nil {
		t.Fatal(err)
	}
	var se *store.StoreError
	if err := s.MarkSent(ctx, done); !errors.Is(err, store.ErrRecordChanged) || !errors.As(err, &se) || se.Op != "mark sent" {
		t.Errorf("MarkSent of a's completion, the record now b's, returned %v; want a *store.StoreError (mark sent) matching ErrRecordChanged", err)
	}
	if rec, err := s.Read(ctx, id); err != nil || string(rec.Outbox) != "b's" {
		t.Errorf("b's outbox after the refused MarkSent is %q (%v); want it kept", rec.Outbox, err)
	}
}

// TestLargestResultAndOutbox: a result and an outbox of MaxResultSize
// bytes together fit, in a plain completion and in a transaction's.
func TestLargestResultAndOutbox(t *testing.T) {
	pool := newPool(t, "")
	s := newTable(t, pool, "outbox_records")
	e := newEffects(t, pool)
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond)
	result := bytes.Repeat([]byte("r"), store.MaxResultSize/3)
	outbox := bytes.Repeat([]byte("o"), store.MaxResultSize-len(result))
	c := store.Completion{Until: now.Add(time.Hour), Result: result, Outbox: outbox}

	plain := "p#max-plain-" + now.String()
	if err := s.Complete(ctx, acquire(t, s, plain, "o", now), c); err != nil {
		t.Fatalf("Complete with %d bytes of result and outbox: %v", store.MaxResultSize, err)
	}
	inTx := "p#max-tx-" + now.String()
	tx := s.Begin(acquire(t, s, inTx, "o", now))
	if err := e.Add(ctx, tx, inTx, false); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx, c); err != nil {
		t.Fatalf("Commit with %d bytes of result and outbox: %v", store.MaxResultSize, err)
	}
	for _, id := range []string{plain, inTx} {
		if rec, err := s.Read(ctx, id); err != nil || !bytes.Equal(rec.Result, result) || !bytes.Equal(rec.Outbox, outbox) {
			t.Errorf("%s reads %d bytes of result and %d of outbox (%v); want %d and %d", id, len(rec.Result), len(rec.Outbox), err, len(result), len(outbox))
		}
	}
}
