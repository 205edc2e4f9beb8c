package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// Store is the store.Store on a PostgreSQL table (TableDDL). Every method
// is one SQL statement on the pool, atomic on the server; a statement that
// lost a race with a concurrent one on the same record (it read the record
// before the other's write and found it changed when it wrote) runs again.
// Safe for concurrent use, as the pool is.
type Store struct {
	pool  *pgxpool.Pool
	name  string // as given, for messages
	ident pgx.Identifier
	t     string // quoted, for SQL
	q     queries
}

var (
	_ store.Store      = (*Store)(nil)
	_ store.Admin      = (*Store)(nil)
	_ store.Checker    = (*Store)(nil)
	_ store.Transactor = (*Store)(nil)
)

// New returns the Store on table, in pool's database: a table name, or
// schema.table. The table is created by CreateTable (or the SQL of
// TableDDL); New makes no call (Check verifies the table).
func New(pool *pgxpool.Pool, table string) *Store {
	ident := identifier(table)
	t := ident.Sanitize()
	return &Store{pool: pool, name: table, ident: ident, t: t, q: newQueries(t)}
}

// identifier splits "schema.table" into its parts; a name without a dot
// is a table in the search path.
func identifier(table string) pgx.Identifier {
	return pgx.Identifier(strings.SplitN(table, ".", 2))
}

// Table is the table's name, as given to New.
func (s *Store) Table() string { return s.name }

// cols are the record's columns, in the order scan reads them.
const cols = "status, owner, fence, lock_expires_at, expires_at, payload_hash, result, outbox"

// row is a record as a query returns it; every field nil when there is
// none (a LEFT JOIN that found no row).
type row struct {
	status, owner, hash *string
	fence, lock, expire *int64
	result, outbox      []byte
}

func (r *row) dest() []any {
	return []any{&r.status, &r.owner, &r.fence, &r.lock, &r.expire, &r.hash, &r.result, &r.outbox}
}

func (r *row) exists() bool { return r.status != nil }

// record is the row as a store.Record, with a *store.RecordError for a row
// the protocol did not write (a status of its own, a lock without its
// expiry): as far as it could be read, so that an operator still sees it.
func (r *row) record(id string) (store.Record, error) {
	rec := store.Record{ID: id, Result: r.result, Outbox: r.outbox}
	if r.status != nil {
		rec.Status = store.Status(*r.status)
	}
	if r.owner != nil {
		rec.Owner = *r.owner
	}
	if r.hash != nil {
		rec.PayloadHash = *r.hash
	}
	if r.fence != nil {
		rec.Fence = *r.fence
	}
	if r.expire != nil {
		rec.ExpiresAt = time.Unix(*r.expire, 0)
	}
	if r.lock != nil {
		rec.LockExpiresAt = time.UnixMilli(*r.lock)
	}
	switch rec.Status {
	case store.StatusProcessing:
		if r.lock == nil {
			return rec, &store.RecordError{ID: id, Problem: "a PROCESSING row without lock_expires_at"}
		}
		rec.LockExpiresAt = time.UnixMilli(*r.lock)
	case store.StatusCompleted:
		rec.LockExpiresAt = time.Time{}
	case store.StatusReleased:
	default:
		return rec, &store.RecordError{ID: id, Problem: fmt.Sprintf("status is %q, not %s, %s or %s", rec.Status, store.StatusProcessing, store.StatusCompleted, store.StatusReleased)}
	}
	return rec, nil
}

// queries are the store's statements on its table. Each write runs in a
// WITH whose main query reads the record as the statement found it (its
// snapshot): what a refusal reports, and what tells a record absent from
// one refused.
type queries struct {
	acquire, renew, complete, release, markSent, read, settle, forget, locks, completeTx string
}

func newQueries(t string) queries {
	// found reads the record as of the statement's snapshot, beside
	// whether the write (w, RETURNING 1) applied.
	found := func(write string) string {
		return "WITH w AS (" + write + " RETURNING 1) SELECT (SELECT count(*) FROM w), c.status, c.owner, c.fence, c.lock_expires_at, c.expires_at, c.payload_hash, c.result, c.outbox FROM (SELECT 1) AS one LEFT JOIN " + t + " AS c ON c.id = $1"
	}
	return queries{
		// cur locks the record and reads its latest version (FOR UPDATE
		// waits for a concurrent writer and follows its update); the
		// INSERT reads cur, so cur runs first. ON CONFLICT evaluates the
		// condition on the same latest version: the DynamoDB store's
		// condition, free when no record, RELEASED, a lock expired before
		// now (ms), or a window ended before now (s). The fence is the
		// record's plus one, or the seed's plus one for a new record (or
		// one written before fencing, fence 0). ins.inserted tells a new
		// row from a replaced one (xmax is 0 on a row inserted). The new
		// lock carries neither the result nor the outbox of the record it
		// replaces: those were its completion's.
		acquire: `WITH cur AS (SELECT ` + cols + ` FROM ` + t + ` WHERE id = $1 FOR UPDATE),
ins AS (
  INSERT INTO ` + t + ` AS r (id, status, owner, fence, lock_expires_at, expires_at, payload_hash, result, outbox)
  SELECT $1, 'PROCESSING', $2, $3::bigint + 1, $4, $5, $6, NULL, NULL FROM (SELECT count(*) FROM cur) AS forced
  ON CONFLICT (id) DO UPDATE SET status = 'PROCESSING', owner = $2,
    fence = CASE WHEN r.fence > 0 THEN r.fence + 1 ELSE $3::bigint + 1 END,
    lock_expires_at = $4, expires_at = $5, payload_hash = $6, result = NULL, outbox = NULL
  WHERE r.status = 'RELEASED' OR (r.status = 'PROCESSING' AND r.lock_expires_at < $7) OR (r.status = 'COMPLETED' AND r.expires_at < $8)
  RETURNING r.fence, r.xmax::text = '0' AS inserted)
SELECT ins.fence, ins.inserted, c.status, c.owner, c.fence, c.lock_expires_at, c.expires_at, c.payload_hash, c.result, c.outbox
FROM (SELECT 1) AS one LEFT JOIN ins ON true LEFT JOIN cur AS c ON true`,
		renew: found(`UPDATE ` + t + ` SET lock_expires_at = $3, expires_at = $4 WHERE id = $1 AND owner = $2 AND status = 'PROCESSING'`),
		// The result and the outbox are written with the status, in the
		// one statement: the outbox is there iff the completion is.
		complete: found(`UPDATE ` + t + ` SET status = 'COMPLETED', expires_at = $3, lock_expires_at = NULL, result = $4, outbox = $5 WHERE id = $1 AND owner = $2`),
		release:  found(`UPDATE ` + t + ` SET status = 'RELEASED', lock_expires_at = 0, expires_at = $3 WHERE id = $1 AND owner = $2 AND status = 'PROCESSING'`),
		// markSent removes the outbox of the completion the caller read
		// (owner and fence), and no other: a later completion's messages
		// are not sent yet. A row whose outbox is already gone is not
		// written again (MarkSent tells it from a changed one by the
		// snapshot).
		markSent: found(`UPDATE ` + t + ` SET outbox = NULL WHERE id = $1 AND owner = $2 AND fence = $3 AND status = 'COMPLETED' AND outbox IS NOT NULL`),
		forget:   found(`DELETE FROM ` + t + ` WHERE id = $1 AND owner = $2 AND status = 'COMPLETED'`),
		// A record past its ExpiresAt is gone, as TTL would have deleted
		// it (Sweep does, later): judged by the database's clock, in
		// whole seconds as the window's end is kept.
		read: `SELECT ` + cols + ` FROM ` + t + ` WHERE id = $1 AND expires_at >= floor(extract(epoch FROM clock_timestamp()))`,
		// settle waits for a transaction still holding the record (a
		// COMMIT in flight whose answer was lost) before it reads.
		settle: `SELECT ` + cols + ` FROM ` + t + ` WHERE id = $1 FOR SHARE`,
		locks: `SELECT a.n, l.id, l.status, l.owner, l.fence, l.lock_expires_at, l.expires_at, l.payload_hash, l.result, l.outbox
FROM (SELECT count(*) AS n FROM ` + t + `) AS a
LEFT JOIN (SELECT id, ` + cols + ` FROM ` + t + ` WHERE status = 'PROCESSING' AND starts_with(id, $1) AND expires_at >= floor(extract(epoch FROM clock_timestamp()))) AS l ON true
ORDER BY l.lock_expires_at, l.id`,
		// The transaction's completion: the lease's own PROCESSING lock,
		// owner and fence, or nothing; its outbox commits with the work's
		// writes or not at all.
		completeTx: `UPDATE ` + t + ` SET status = 'COMPLETED', expires_at = $4, lock_expires_at = NULL, result = $5, outbox = $6 WHERE id = $1 AND owner = $2 AND fence = $3 AND status = 'PROCESSING'`,
	}
}

// raceAttempts bounds the re-runs of a statement that found the record
// changed between its snapshot and its write.
const raceAttempts = 5

func checkID(op, id string) error {
	if id == "" {
		return &store.StoreError{Op: op, ID: id, Err: fmt.Errorf("%w: empty record id", store.ErrMisconfigured)}
	}
	return nil
}

// Acquire implements store.Store.
func (s *Store) Acquire(ctx context.Context, req store.AcquireRequest) (store.Lease, error) {
	if err := checkID("acquire", req.ID); err != nil {
		return store.Lease{}, err
	}
	lease := store.Lease{ID: req.ID, Owner: req.Owner, LockExpiresAt: req.LockUntil}
	for range raceAttempts {
		var fence *int64
		var inserted *bool
		var cur row
		err := s.pool.QueryRow(ctx, s.q.acquire, req.ID, req.Owner, store.FenceSeed(req.Now), req.LockUntil.UnixMilli(),
			ceilSeconds(req.LockUntil.Add(store.FenceRetention)), req.PayloadHash, req.Now.UnixMilli(), req.Now.Unix(),
		).Scan(append([]any{&fence, &inserted}, cur.dest()...)...)
		if err != nil {
			return store.Lease{}, s.fail("acquire", req.ID, err)
		}
		if fence != nil {
			lease.Fence = *fence
			// A row inserted replaced nothing; one updated replaced a
			// lock or a completion unless it was RELEASED. A row inserted
			// since the statement's snapshot (cur empty) was a lock.
			lease.TookOver = !*inserted && (cur.status == nil || *cur.status != string(store.StatusReleased))
			return lease, nil
		}
		if !cur.exists() {
			// Refused by a record inserted after the snapshot: run again
			// to read it.
			continue
		}
		rec, err := cur.record(req.ID)
		switch {
		case err != nil:
			return store.Lease{}, err
		case rec.Status == store.StatusProcessing && rec.Owner == req.Owner:
			// Our own attempt, applied and its answer lost: it already
			// moved the fence.
			lease.Fence = rec.Fence
			return lease, nil
		}
		return store.Lease{}, &store.HeldError{Record: rec}
	}
	return store.Lease{}, s.raced("acquire", req.ID)
}

// write runs one of the found statements and reports whether it applied,
// with the record as the statement's snapshot had it.
func (s *Store) write(ctx context.Context, op, sql string, args ...any) (bool, row, error) {
	var n int64
	var cur row
	err := s.pool.QueryRow(ctx, sql, args...).Scan(append([]any{&n}, cur.dest()...)...)
	if err != nil {
		return false, cur, s.fail(op, args[0].(string), err)
	}
	return n == 1, cur, nil
}

// Renew implements store.Store.
func (s *Store) Renew(ctx context.Context, lease store.Lease, lockUntil time.Time) (store.Lease, error) {
	ok, cur, err := s.write(ctx, "renew", s.q.renew, lease.ID, lease.Owner, lockUntil.UnixMilli(), ceilSeconds(lockUntil.Add(store.FenceRetention)))
	if err != nil {
		return lease, err
	}
	if !ok {
		return lease, lost("renew", lease.ID, cur)
	}
	lease.LockExpiresAt = lockUntil
	return lease, nil
}

// Complete implements store.Store: one UPDATE writes the status, the
// window, the result and the outbox.
func (s *Store) Complete(ctx context.Context, lease store.Lease, c store.Completion) error {
	ok, cur, err := s.write(ctx, "complete", s.q.complete, lease.ID, lease.Owner, c.Until.Unix(), c.Result, c.Outbox)
	if err != nil {
		return err
	}
	if !ok {
		return lost("complete", lease.ID, cur)
	}
	return nil
}

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, lease store.Lease, now time.Time) error {
	for range raceAttempts {
		ok, cur, err := s.write(ctx, "release", s.q.release, lease.ID, lease.Owner, ceilSeconds(now.Add(store.FenceRetention)))
		switch {
		case err != nil:
			return err
		case ok, !cur.exists():
			return nil
		case *cur.owner == lease.Owner && *cur.status == string(store.StatusReleased):
			// A repeat of an applied Release.
			return nil
		case *cur.owner == lease.Owner && *cur.status == string(store.StatusProcessing):
			// The snapshot saw our lock, the write found it changed:
			// read again what it became.
			continue
		}
		return lost("release", lease.ID, cur)
	}
	return s.raced("release", lease.ID)
}

// MarkSent implements store.Store: one UPDATE, conditioned on the
// completion rec was read as (COMPLETED, rec.Owner, rec.Fence), sets the
// outbox NULL and keeps the rest of the record.
func (s *Store) MarkSent(ctx context.Context, rec store.Record) error {
	for range raceAttempts {
		ok, cur, err := s.write(ctx, "mark sent", s.q.markSent, rec.ID, rec.Owner, rec.Fence)
		switch {
		case err != nil:
			return err
		case ok, !cur.exists():
			return nil
		case *cur.status == string(store.StatusCompleted) && *cur.owner == rec.Owner && *cur.fence == rec.Fence:
			if cur.outbox == nil {
				// Marked already: a repeat, or another delivery's.
				return nil
			}
			// The snapshot saw the outbox, the write found the row
			// changed: read again what it became.
			continue
		}
		now, _ := cur.record(rec.ID)
		return &store.StoreError{Op: "mark sent", ID: rec.ID, Err: fmt.Errorf("%w: the record is %s, not the completion %s", store.ErrRecordChanged, now, rec)}
	}
	return s.raced("mark sent", rec.ID)
}

// Read implements store.Store.
func (s *Store) Read(ctx context.Context, id string) (store.Record, error) {
	var r row
	err := s.pool.QueryRow(ctx, s.q.read, id).Scan(r.dest()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Record{}, fmt.Errorf("record %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Record{}, s.fail("read", id, err)
	}
	return r.record(id)
}

// Forget implements store.Admin.
func (s *Store) Forget(ctx context.Context, rec store.Record) error {
	for range raceAttempts {
		ok, cur, err := s.write(ctx, "forget", s.q.forget, rec.ID, rec.Owner)
		switch {
		case err != nil:
			return err
		case ok, !cur.exists():
			return nil
		case *cur.owner == rec.Owner && *cur.status == string(store.StatusCompleted):
			continue // changed between the snapshot and the delete
		}
		now, _ := cur.record(rec.ID)
		return fmt.Errorf("record %q was %s when read and is now %s: %w", rec.ID, rec, now, store.ErrRecordChanged)
	}
	return s.raced("forget", rec.ID)
}

// Locks implements store.Admin. It reads the whole table (one statement):
// its cost is the table's size.
func (s *Store) Locks(ctx context.Context, prefix string, progress func(scanned, found int)) ([]store.Record, error) {
	rows, err := s.pool.Query(ctx, s.q.locks, prefix+"#")
	if err != nil {
		return nil, s.fail("scan", prefix+"#", err)
	}
	defer rows.Close()
	var locks []store.Record
	var scanned int64
	for rows.Next() {
		var id *string
		var r row
		if err := rows.Scan(append([]any{&scanned, &id}, r.dest()...)...); err != nil {
			return nil, s.fail("scan", prefix+"#", err)
		}
		if id == nil {
			continue // no lock: the count alone
		}
		// A lock the protocol did not write is listed as far as it reads.
		rec, _ := r.record(*id)
		locks = append(locks, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("scan", prefix+"#", err)
	}
	if progress != nil {
		progress(int(scanned), len(locks))
	}
	return locks, nil
}

func lost(op, id string, cur row) error {
	what := "the record is gone"
	if cur.exists() {
		rec, _ := cur.record(id)
		what = "the record is " + rec.String()
	}
	return fmt.Errorf("%s %q: %w (%s)", op, id, store.ErrLockLost, what)
}

// raced is a statement that found the record changed on every attempt:
// the record is contended, and a retry may tell.
func (s *Store) raced(op, id string) error {
	return &store.StoreError{Op: op, ID: id, Err: fmt.Errorf("the record changed under each of %d attempts", raceAttempts)}
}

// ceilSeconds is t in epoch seconds, rounded up, as the DynamoDB store
// writes its TTL.
func ceilSeconds(t time.Time) int64 {
	if s := t.Unix(); time.Unix(s, 0).Before(t) {
		return s + 1
	}
	return t.Unix()
}
