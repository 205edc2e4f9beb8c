package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// TableDDL is the SQL that creates the store's table (table as New takes
// it) and the index Sweep uses, if they do not exist, and adds the outbox
// column to a table an earlier version created without it: what
// CreateTable runs, for a migration tool of your own. Every statement is
// idempotent.
func TableDDL(table string) string {
	create, migrate, index := ddl(table)
	return create + ";\n" + migrate + ";\n" + index + ";\n"
}

// ddl is TableDDL's statements: the table, the outbox column's migration
// (the table's one column an earlier version lacked) and the index.
func ddl(table string) (create, migrate, index string) {
	ident := identifier(table)
	t := ident.Sanitize()
	idx := pgx.Identifier{ident[len(ident)-1] + "_expires_at"}.Sanitize()
	create = `CREATE TABLE IF NOT EXISTS ` + t + ` (
  id              text PRIMARY KEY,  -- "<key prefix>#<key>"
  status          text NOT NULL,     -- PROCESSING, COMPLETED or RELEASED
  owner           text NOT NULL,     -- the acquisition's owner token
  fence           bigint NOT NULL,   -- the fencing token
  lock_expires_at bigint,            -- a lock's expiry, epoch milliseconds
  expires_at      bigint NOT NULL,   -- when Sweep may delete the record, epoch seconds
  payload_hash    text NOT NULL DEFAULT '',
  result          bytea,             -- the work's result, NULL when none
  outbox          bytea              -- the work's messages not yet sent, NULL when none
)`
	migrate = "-- a table created by an earlier version has no outbox: add it\n" + addOutbox(t)
	index = `CREATE INDEX IF NOT EXISTS ` + idx + ` ON ` + t + ` (expires_at)`
	return create, migrate, index
}

// addOutbox is the statement that adds the outbox column to the table t
// (quoted) if it lacks it: a nullable column without a default, which
// PostgreSQL adds in its catalog alone, without rewriting the table.
func addOutbox(t string) string {
	return `ALTER TABLE ` + t + ` ADD COLUMN IF NOT EXISTS outbox bytea`
}

// CreateTable creates the store's table and its index in pool's database
// if they do not exist, and adds the outbox column to a table an earlier
// version created without it (TableDDL): safe to run at every start and
// from several processes at once.
func CreateTable(ctx context.Context, pool *pgxpool.Pool, table string) error {
	s := New(pool, table)
	create, migrate, index := ddl(table)
	if err := s.exec(ctx, create); err != nil {
		return err
	}
	// ALTER TABLE takes the table's ACCESS EXCLUSIVE lock before it looks
	// for the column, IF NOT EXISTS or not: run at every start, it would
	// wait for every transaction on the table (a work's, holding its
	// record's row) while every statement queued behind it waits too. The
	// catalog tells first whether it is needed, which it is once.
	var has bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = 'outbox' AND attnum > 0 AND NOT attisdropped)`, s.t).Scan(&has); err != nil {
		return s.fail("create table", table, err)
	}
	if !has {
		if err := s.exec(ctx, migrate); err != nil {
			return err
		}
	}
	// CREATE INDEX takes the table's SHARE lock before it finds the index
	// there, waiting behind every write in flight and holding the next
	// back: the catalog first, as for the column.
	ident := identifier(table)
	qualified := append(pgx.Identifier{}, ident...)
	qualified[len(qualified)-1] += "_expires_at"
	var indexed bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, qualified.Sanitize()).Scan(&indexed); err != nil {
		return s.fail("create table", table, err)
	}
	if indexed {
		return nil
	}
	return s.exec(ctx, index)
}

// exec runs one of CreateTable's statements, which another process may be
// running at the same time.
func (s *Store) exec(ctx context.Context, stmt string) error {
	_, err := s.pool.Exec(ctx, stmt)
	var pg *pgconn.PgError
	// Two creators racing: IF NOT EXISTS does not hold a lock, and the
	// loser meets the winner's catalog row (23505, 42P07). Two ALTERs wait
	// for each other's lock and the second finds the column (a notice);
	// a duplicate column (42701) would be the same race.
	if err == nil || errors.As(err, &pg) && (pg.Code == "23505" || pg.Code == "42P07" || pg.Code == "42701") {
		return nil
	}
	return s.fail("create table", s.name, err)
}

// sweepBatch bounds one DELETE: each holds its rows' locks until it ends.
const sweepBatch = 1000

// Sweep deletes up to limit records whose ExpiresAt is before now (in
// whole seconds: a completion's window includes its last second), in
// statements of at most a thousand rows, and returns how many it deleted.
// PostgreSQL has no TTL: run it now and then (a cron job, a ticker in the
// processor's process), as often as the table's growth asks; a record past
// its ExpiresAt already counts as absent to Acquire and Read, so a late
// sweep costs only space. Records another statement holds are left for
// the next sweep.
func (s *Store) Sweep(ctx context.Context, now time.Time, limit int) (int, error) {
	// The outer condition is evaluated again on a row changed since the
	// inner select (a record taken by a new lock meanwhile): it keeps it.
	q := `DELETE FROM ` + s.t + ` WHERE expires_at < $1 AND id IN (SELECT id FROM ` + s.t +
		` WHERE expires_at < $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)`
	total := 0
	for total < limit {
		n := min(sweepBatch, limit-total)
		tag, err := s.pool.Exec(ctx, q, now.Unix(), n)
		if err != nil {
			return total, s.fail("sweep", s.name, err)
		}
		total += int(tag.RowsAffected())
		if tag.RowsAffected() < int64(n) {
			break
		}
	}
	return total, nil
}

// errNoTable is Check's error for a table that does not exist.
func (s *Store) errNoTable() error {
	return fmt.Errorf("pgstore: %w: the table %s does not exist in the database: create it with pgstore.CreateTable(ctx, pool, %q), or run this SQL:\n%s", store.ErrMisconfigured, s.t, s.name, TableDDL(s.name))
}

// errNoOutbox is Check's error for the table of an earlier version, which
// lacks the outbox column and nothing else: the SQL that adds it.
func (s *Store) errNoOutbox() error {
	return fmt.Errorf("pgstore: %w: the table %s has no column outbox (bytea), where this version keeps a completion's messages not yet sent (an earlier version created the table without it): add it with pgstore.CreateTable(ctx, pool, %q), or run this SQL as the table's owner (a nullable column without a default: a change of the catalog, the table is not rewritten):\n%s;\n", store.ErrMisconfigured, s.t, s.name, addOutbox(s.t))
}
