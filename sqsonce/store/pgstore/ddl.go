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
// it) and the index Sweep uses, if they do not exist: what CreateTable
// runs, for a migration tool of your own.
func TableDDL(table string) string {
	create, index := ddl(table)
	return create + ";\n" + index + ";\n"
}

func ddl(table string) (create, index string) {
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
  result          bytea              -- the work's result, NULL when none
)`
	index = `CREATE INDEX IF NOT EXISTS ` + idx + ` ON ` + t + ` (expires_at)`
	return create, index
}

// CreateTable creates the store's table and its index in pool's database
// if they do not exist (TableDDL): safe to run at every start and from
// several processes at once.
func CreateTable(ctx context.Context, pool *pgxpool.Pool, table string) error {
	create, index := ddl(table)
	for _, stmt := range []string{create, index} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			var pg *pgconn.PgError
			// Two creators racing: IF NOT EXISTS does not hold a lock, and
			// the loser meets the winner's catalog row.
			if errors.As(err, &pg) && (pg.Code == "23505" || pg.Code == "42P07") {
				continue
			}
			s := New(pool, table)
			return s.fail("create table", table, err)
		}
	}
	return nil
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
