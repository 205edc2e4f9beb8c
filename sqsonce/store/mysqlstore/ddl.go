package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// TableDDL is the SQL that creates the store's table (table as New takes
// it), with the index Sweep uses, if it does not exist: what CreateTable
// runs, for a migration tool of your own. It is one statement, and
// idempotent.
//
// The record id is VARBINARY: compared byte for byte, as the other stores
// compare keys. A VARCHAR key under MySQL's default collations would take
// "Order-1" and "order-1" (case), or "k" and "k " (trailing spaces: every
// PAD SPACE collation, utf8mb4_bin included) for one record, and one key's
// completion would answer the other's message as a duplicate. Times are
// BIGINT epoch milliseconds (a lock's expiry) and seconds (a record's
// expiry), as on the other stores: exact to the millisecond the protocol
// compares, and the same whatever the server's, the session's or the
// driver's (loc, parseTime) time zone, which DATETIME would depend on.
func TableDDL(table string) string {
	return ddl(table) + ";\n"
}

// ddl is TableDDL's statement.
func ddl(table string) string {
	t := quote(table)
	return `CREATE TABLE IF NOT EXISTS ` + t + ` (
  id              VARBINARY(2048) NOT NULL,   -- "<key prefix>#<key>", compared byte for byte
  status          VARBINARY(16) NOT NULL,     -- PROCESSING, COMPLETED or RELEASED
  owner           VARBINARY(2048) NOT NULL,   -- the acquisition's owner token
  fence           BIGINT NOT NULL,            -- the fencing token
  lock_expires_at BIGINT NULL,                -- a lock's expiry, epoch milliseconds
  expires_at      BIGINT NOT NULL,            -- when Sweep may delete the record, epoch seconds
  payload_hash    VARBINARY(2048) NOT NULL DEFAULT '',
  result          MEDIUMBLOB NULL,            -- the work's result, NULL when none
  outbox          MEDIUMBLOB NULL,            -- the work's messages not yet sent, NULL when none
  version         BIGINT NOT NULL DEFAULT 0,  -- moved on by every write: a write changes the row it matches
  PRIMARY KEY (id),
  KEY expires_at (expires_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4`
}

// CreateTable creates the store's table in db's database if it does not
// exist (TableDDL): safe to run at every start and from several processes
// at once (CREATE TABLE IF NOT EXISTS takes the table's metadata lock: the
// second waits and finds the table; the index is part of the statement).
// A table of the same name that is not the store's is left as it is:
// Check says what differs.
func CreateTable(ctx context.Context, db *sql.DB, table string) error {
	s := New(db, table)
	if _, err := db.ExecContext(ctx, ddl(table)); err != nil {
		return s.fail("create table", table, err)
	}
	return nil
}

// sweepBatch bounds one DELETE: each holds its rows' locks until it ends.
const sweepBatch = 1000

// Sweep deletes up to limit records whose ExpiresAt is before now (in
// whole seconds: a completion's window includes its last second), in
// statements of at most a thousand rows, the earliest first, and returns
// how many it deleted. MySQL has no TTL: run it now and then (a cron job,
// a ticker in the processor's process, a MySQL EVENT with the same
// DELETE), as often as the table's growth asks; a record past its
// ExpiresAt already counts as absent to Acquire and Read, so a late sweep
// costs only space.
func (s *Store) Sweep(ctx context.Context, now time.Time, limit int) (int, error) {
	q := `DELETE FROM ` + s.t + ` WHERE expires_at < ? ORDER BY expires_at LIMIT ?`
	total := 0
	for total < limit {
		n := min(sweepBatch, limit-total)
		res, err := s.db.ExecContext(ctx, q, now.Unix(), n)
		if err != nil {
			return total, s.fail("sweep", s.name, err)
		}
		// A DELETE counts the rows it deleted, whatever the DSN.
		got, err := res.RowsAffected()
		if err != nil {
			return total, s.fail("sweep", s.name, err)
		}
		total += int(got)
		if got < int64(n) {
			break
		}
	}
	return total, nil
}

// errNoTable is Check's error for a table that does not exist.
func (s *Store) errNoTable() error {
	return fmt.Errorf("mysqlstore: %w: the table %s does not exist in the database: create it with mysqlstore.CreateTable(ctx, db, %q), or run this SQL:\n%s", store.ErrMisconfigured, s.t, s.name, TableDDL(s.name))
}
