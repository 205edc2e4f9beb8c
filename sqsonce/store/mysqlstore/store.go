package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// Store is the store.Store on a MySQL or MariaDB table (TableDDL). Every
// write is one statement on the pool, conditioned as the DynamoDB store's
// are; a refusal reads the record to say what refused it. Safe for
// concurrent use, as the *sql.DB is.
type Store struct {
	db   *sql.DB
	name string // as given, for messages
	t    string // quoted, for SQL
	q    queries
	// trustStatements skips the check that no statement of a work's
	// failed before its commit: set only by the package's own tests, as
	// the mutant that trusts MySQL to have aborted the transaction.
	trustStatements bool
}

var (
	_ store.Store      = (*Store)(nil)
	_ store.Admin      = (*Store)(nil)
	_ store.Checker    = (*Store)(nil)
	_ store.Transactor = (*Store)(nil)
)

// New returns the Store on table, in db's database: a table name, or
// database.table. The table is created by CreateTable (or the SQL of
// TableDDL); New makes no call (Check verifies the table). The store
// works whatever db's DSN says about clientFoundRows, parseTime, loc and
// the session's time zone: it writes times as integers and every write
// changes the row it matches.
func New(db *sql.DB, table string) *Store {
	t := quote(table)
	return &Store{db: db, name: table, t: t, q: newQueries(t, true)}
}

// quote is table as a MySQL identifier: each part of "database.table" in
// backquotes, a backquote in a name doubled, so that no name breaks out
// of it.
func quote(table string) string {
	parts := strings.SplitN(table, ".", 2)
	for i, p := range parts {
		parts[i] = "`" + strings.ReplaceAll(p, "`", "``") + "`"
	}
	return strings.Join(parts, ".")
}

// Table is the table's name, as given to New.
func (s *Store) Table() string { return s.name }

// cols are the record's columns, in the order scan reads them.
const cols = "status, owner, fence, lock_expires_at, expires_at, payload_hash, result, outbox, version"

// row is a record as a query returns it; every field nil when there is
// none (a LEFT JOIN that found no row).
type row struct {
	status, owner, hash      *string
	fence, lock, expire, ver *int64
	result, outbox           []byte
}

func (r *row) dest() []any {
	return []any{&r.status, &r.owner, &r.fence, &r.lock, &r.expire, &r.hash, &r.result, &r.outbox, &r.ver}
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
	case store.StatusCompleted:
		rec.LockExpiresAt = time.Time{}
	case store.StatusReleased:
	default:
		return rec, &store.RecordError{ID: id, Problem: fmt.Sprintf("status is %q, not %s, %s or %s", rec.Status, store.StatusProcessing, store.StatusCompleted, store.StatusReleased)}
	}
	return rec, nil
}

// queries are the store's statements on its table.
type queries struct {
	insert, take, renew, complete, release, markSent, forget, current, read, settle, locks, completeTx string
}

// newQueries returns the statements on the table t (quoted). Every UPDATE
// moves the row's version on (bump): MySQL's rows-affected counts only the
// rows a statement changed, unless the connection set clientFoundRows, and
// the store cannot know the user's DSN; a statement that changes every row
// it matches makes "one row affected" mean "the condition held" on every
// connection. A repeated Complete, or a Renew to the same expiry, writes
// values the row already has: without the bump it would count 0 and be
// taken for a lost lock. bump is false only in the package's own tests, as
// the mutant that trusts rows-affected without it (Acquire's
// compare-and-set moves the version on all the same: it is its token).
func newQueries(t string, bump bool) queries {
	b := ""
	if bump {
		b = ", version = version + 1"
	}
	return queries{
		// A new record: its fence is the seed's plus one. A duplicate key
		// (1062) is a record there: Acquire reads it and decides.
		insert: `INSERT INTO ` + t + ` (id, status, owner, fence, lock_expires_at, expires_at, payload_hash, result, outbox, version) VALUES (?, 'PROCESSING', ?, ?, ?, ?, ?, NULL, NULL, 0)`,
		// take replaces the record Acquire read, if it is still that one
		// (its version): a compare-and-set. The new lock carries neither
		// the result nor the outbox of the record it replaces: those were
		// its completion's.
		// (The version moves on here in every case: it is the
		// compare-and-set's token.)
		take:     `UPDATE ` + t + ` SET status = 'PROCESSING', owner = ?, fence = ?, lock_expires_at = ?, expires_at = ?, payload_hash = ?, result = NULL, outbox = NULL, version = version + 1 WHERE id = ? AND version = ?`,
		renew:    `UPDATE ` + t + ` SET lock_expires_at = ?, expires_at = ?` + b + ` WHERE id = ? AND owner = ? AND status = 'PROCESSING'`,
		complete: `UPDATE ` + t + ` SET status = 'COMPLETED', expires_at = ?, lock_expires_at = NULL, result = ?, outbox = ?` + b + ` WHERE id = ? AND owner = ?`,
		release:  `UPDATE ` + t + ` SET status = 'RELEASED', lock_expires_at = 0, expires_at = ?` + b + ` WHERE id = ? AND owner = ? AND status = 'PROCESSING'`,
		// markSent removes the outbox of the completion the caller read
		// (owner and fence), and no other: a later completion's messages
		// are not sent yet.
		markSent: `UPDATE ` + t + ` SET outbox = NULL` + b + ` WHERE id = ? AND owner = ? AND fence = ? AND status = 'COMPLETED' AND outbox IS NOT NULL`,
		forget:   `DELETE FROM ` + t + ` WHERE id = ? AND owner = ? AND status = 'COMPLETED'`,
		// current is the record as it is, expired or not: what refused a
		// write.
		current: `SELECT ` + cols + ` FROM ` + t + ` WHERE id = ?`,
		// A record past its ExpiresAt is gone, as TTL would have deleted
		// it (Sweep does, later): judged by the database's clock, in
		// whole seconds as the window's end is kept. UNIX_TIMESTAMP() is
		// the epoch, whatever the session's time zone.
		read: `SELECT ` + cols + ` FROM ` + t + ` WHERE id = ? AND expires_at >= UNIX_TIMESTAMP()`,
		// settle waits for a transaction still holding the record (a
		// COMMIT in flight whose answer was lost) before it reads. LOCK IN
		// SHARE MODE is the spelling MariaDB and MySQL 8 both take.
		settle: `SELECT ` + cols + ` FROM ` + t + ` WHERE id = ? LOCK IN SHARE MODE`,
		locks: `SELECT a.n, l.id, l.status, l.owner, l.fence, l.lock_expires_at, l.expires_at, l.payload_hash, l.result, l.outbox, l.version
FROM (SELECT COUNT(*) AS n FROM ` + t + `) AS a
LEFT JOIN (SELECT id, ` + cols + ` FROM ` + t + ` WHERE status = 'PROCESSING' AND LEFT(id, ?) = ? AND expires_at >= UNIX_TIMESTAMP()) AS l ON TRUE
ORDER BY l.lock_expires_at, l.id`,
		// The transaction's completion: the lease's own PROCESSING lock,
		// owner and fence, or nothing; its outbox commits with the work's
		// writes or not at all. It changes the status of the row it
		// matches, so it counts one whatever the DSN.
		completeTx: `UPDATE ` + t + ` SET status = 'COMPLETED', expires_at = ?, lock_expires_at = NULL, result = ?, outbox = ?` + b + ` WHERE id = ? AND owner = ? AND fence = ? AND status = 'PROCESSING'`,
	}
}

// raceAttempts bounds the re-runs of an operation that found the record
// changed between its read and its write.
const raceAttempts = 5

// MaxIDBytes is the longest record id the table's key (VARBINARY(2048))
// holds: DynamoDB's limit on a partition key, so that a key the other
// stores take is taken here too.
const MaxIDBytes = 2048

func checkID(op, id string) error {
	switch {
	case id == "":
		return &store.StoreError{Op: op, ID: id, Err: fmt.Errorf("%w: empty record id", store.ErrMisconfigured)}
	case len(id) > MaxIDBytes:
		// Refused here: a server whose sql_mode is not strict would
		// truncate it into another key's id.
		return &store.StoreError{Op: op, ID: id, Err: fmt.Errorf("%w: the record id is %d bytes, more than the table's key holds (%d): hash long keys (sqsonce's Config.HashKeys)", store.ErrMisconfigured, len(id), MaxIDBytes)}
	}
	return nil
}

// current reads the record as it is now (nil fields: none).
func (s *Store) current(ctx context.Context, op, id string) (row, error) {
	var r row
	err := s.db.QueryRowContext(ctx, s.q.current, id).Scan(r.dest()...)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return r, s.fail(op, id, err)
	}
	return r, nil
}

// Acquire implements store.Store: an INSERT for a new key; for a record
// there, a read of it and, if it does not hold the key, an UPDATE of that
// very version of it (a compare-and-set), run again if another write came
// between.
func (s *Store) Acquire(ctx context.Context, req store.AcquireRequest) (store.Lease, error) {
	if err := checkID("acquire", req.ID); err != nil {
		return store.Lease{}, err
	}
	lease := store.Lease{ID: req.ID, Owner: req.Owner, LockExpiresAt: req.LockUntil}
	seed := store.FenceSeed(req.Now)
	retain := ceilSeconds(req.LockUntil.Add(store.FenceRetention))
	for range raceAttempts {
		_, err := s.db.ExecContext(ctx, s.q.insert, req.ID, req.Owner, seed+1, req.LockUntil.UnixMilli(), retain, req.PayloadHash)
		if err == nil {
			lease.Fence = seed + 1
			return lease, nil
		}
		if code(err) != errDupEntry {
			return store.Lease{}, s.fail("acquire", req.ID, err)
		}
		cur, err := s.current(ctx, "acquire", req.ID)
		if err != nil {
			return store.Lease{}, err
		}
		if !cur.exists() {
			continue // deleted since the INSERT: insert again
		}
		rec, err := cur.record(req.ID)
		switch {
		case err != nil:
			return store.Lease{}, err
		case rec.Blocks(req.Now) && rec.Status == store.StatusProcessing && rec.Owner == req.Owner:
			// Our own attempt, applied and its answer lost: it already
			// moved the fence.
			lease.Fence = rec.Fence
			return lease, nil
		case rec.Blocks(req.Now):
			return store.Lease{}, &store.HeldError{Record: rec}
		}
		fence := seed + 1
		if rec.Fence > 0 {
			fence = rec.Fence + 1
		}
		res, err := s.db.ExecContext(ctx, s.q.take, req.Owner, fence, req.LockUntil.UnixMilli(), retain, req.PayloadHash, req.ID, *cur.ver)
		if err != nil {
			return store.Lease{}, s.fail("acquire", req.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return store.Lease{}, s.fail("acquire", req.ID, err)
		} else if n == 1 {
			lease.Fence = fence
			lease.TookOver = rec.Status != store.StatusReleased
			return lease, nil
		}
		// Another write came between the read and the UPDATE: read again.
	}
	return store.Lease{}, s.raced("acquire", req.ID)
}

// write runs one of the conditional statements and reports whether it
// applied; when it did not, the record as it is now, to say why.
func (s *Store) write(ctx context.Context, op, id, q string, args ...any) (bool, row, error) {
	res, err := s.db.ExecContext(ctx, q, args...)
	if err != nil {
		return false, row{}, s.fail(op, id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, row{}, s.fail(op, id, err)
	}
	if n == 1 {
		return true, row{}, nil
	}
	cur, err := s.current(ctx, op, id)
	return false, cur, err
}

// Renew implements store.Store.
func (s *Store) Renew(ctx context.Context, lease store.Lease, lockUntil time.Time) (store.Lease, error) {
	ok, cur, err := s.write(ctx, "renew", lease.ID, s.q.renew, lockUntil.UnixMilli(), ceilSeconds(lockUntil.Add(store.FenceRetention)), lease.ID, lease.Owner)
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
	ok, cur, err := s.write(ctx, "complete", lease.ID, s.q.complete, c.Until.Unix(), c.Result, c.Outbox, lease.ID, lease.Owner)
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
		ok, cur, err := s.write(ctx, "release", lease.ID, s.q.release, ceilSeconds(now.Add(store.FenceRetention)), lease.ID, lease.Owner)
		switch {
		case err != nil:
			return err
		case ok, !cur.exists():
			return nil
		case *cur.owner == lease.Owner && *cur.status == string(store.StatusReleased):
			// A repeat of an applied Release.
			return nil
		case *cur.owner == lease.Owner && *cur.status == string(store.StatusProcessing):
			// Our lock again, written between the UPDATE and the read:
			// try again.
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
		ok, cur, err := s.write(ctx, "mark sent", rec.ID, s.q.markSent, rec.ID, rec.Owner, rec.Fence)
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
			// The outbox is there: written between the UPDATE and the
			// read (it cannot come back to the same completion, but the
			// read is not the UPDATE's): try again.
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
	err := s.db.QueryRowContext(ctx, s.q.read, id).Scan(r.dest()...)
	if errors.Is(err, sql.ErrNoRows) {
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
		// A DELETE counts the rows it deleted, whatever the DSN.
		ok, cur, err := s.write(ctx, "forget", rec.ID, s.q.forget, rec.ID, rec.Owner)
		switch {
		case err != nil:
			return err
		case ok, !cur.exists():
			return nil
		case *cur.owner == rec.Owner && *cur.status == string(store.StatusCompleted):
			continue // written between the DELETE and the read
		}
		now, _ := cur.record(rec.ID)
		return fmt.Errorf("record %q was %s when read and is now %s: %w", rec.ID, rec, now, store.ErrRecordChanged)
	}
	return s.raced("forget", rec.ID)
}

// Locks implements store.Admin. It reads the whole table (one statement):
// its cost is the table's size.
func (s *Store) Locks(ctx context.Context, prefix string, progress func(scanned, found int)) ([]store.Record, error) {
	p := prefix + "#"
	rows, err := s.db.QueryContext(ctx, s.q.locks, len(p), p)
	if err != nil {
		return nil, s.fail("scan", p, err)
	}
	defer rows.Close()
	var locks []store.Record
	var scanned int64
	for rows.Next() {
		var id *string
		var r row
		if err := rows.Scan(append([]any{&scanned, &id}, r.dest()...)...); err != nil {
			return nil, s.fail("scan", p, err)
		}
		if id == nil {
			continue // no lock: the count alone
		}
		// A lock the protocol did not write is listed as far as it reads.
		rec, _ := r.record(*id)
		locks = append(locks, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("scan", p, err)
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

// raced is an operation that found the record changed on every attempt:
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
