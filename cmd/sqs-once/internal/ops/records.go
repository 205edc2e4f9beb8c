package ops

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// Records reads and repairs the idempotency records of one store and
// prefix through the processor's own store: the schema and the conditions
// of release and forget are declared once, there.
type Records struct {
	// Store is the store the records are in (DynamoDB, Redis, PostgreSQL, MySQL);
	// nil is the DynamoDB store on DB and Table.
	Store RecordStore
	// Where names Store for messages ("table <Table>" when empty).
	Where  string
	DB     DynamoAPI
	Table  string
	Prefix string
	// HashKeys: the processor hashes keys (sqsonce.Config.HashKeys), so a
	// key's record is under its sqsonce.HashKey.
	HashKeys bool
	// Region is the table's region, for messages ("" when unknown).
	Region string
	// Now is the clock lock expiry is judged by; injected so tests need not
	// sleep for a lock to expire.
	Now func() time.Time

	// scan finds the records with an outbox (PendingKeys) on a Redis or
	// PostgreSQL store; nil on DynamoDB, scanned with DB.
	scan outboxScanner
}

// Record is one key's record, read back in plain terms.
type Record struct {
	// Key is the key looked up; in a list (Locks), the record id's part
	// after the prefix: the key's hash when keys are hashed, since a hash
	// cannot be turned back into its key.
	Key string `json:"key"`
	// KeyHash is the key's sqsonce.HashKey when keys are hashed: what the
	// processor's logs, metrics and outcomes show instead of the key.
	KeyHash  string       `json:"keyHash,omitempty"`
	RecordID string       `json:"recordId"`
	Status   store.Status `json:"status"`
	Owner    string       `json:"owner,omitempty"`
	Fence    int64        `json:"fence"`
	// LockExpiresAt is set on a PROCESSING record.
	LockExpiresAt *time.Time `json:"lockExpiresAt,omitempty"`
	// ExpiresAt is the TTL: the end of a COMPLETED record's dedupe window;
	// for a lock, when TTL may delete the record (an hour after the lock).
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// Live is set on a PROCESSING record whose lock has not expired: a
	// holder may be running the handler right now.
	Live bool `json:"live"`
	// Remaining is the time left on a live lock, or in an open dedupe window.
	Remaining time.Duration `json:"remainingNanos"`
	// Execution is the execution the key's messages start, when the
	// stack's Target starts one per key (inspect only).
	Execution *Execution `json:"execution,omitempty"`
	// Pending are a COMPLETED record's emitted messages not yet sent
	// (sqsonce.Emit, sqsonce.Pending), in order, with their emit ids: the
	// next delivery of the key sends them, or sqs-once send-pending. Nil
	// when the record has none.
	Pending []PendingMessage `json:"pending,omitempty"`
	// PendingError says why the record's outbox could not be read: it
	// holds messages that neither a delivery nor send-pending can send.
	PendingError string `json:"pendingError,omitempty"`

	// stored is the record as the store read it: what release and forget
	// hand back to the store's conditional writes.
	stored store.Record
}

func (r *Records) store() RecordStore {
	if r.Store != nil {
		return r.Store
	}
	return dynamostore.New(r.DB, r.Table)
}

// fail is a store's error in the package's terms: the DynamoDB store's is
// an AWS call's (a missing table is ErrNotFound), any other store's is
// ErrStore.
func (r *Records) fail(op string, err error) error {
	if _, dynamo := r.store().(*dynamostore.Store); dynamo {
		return awsError(op, err)
	}
	return fmt.Errorf("%s: %w: %w", op, ErrStore, err)
}

// shownKey is key as the record id holds it: its hash when keys are hashed.
func (r *Records) shownKey(key string) string {
	if r.HashKeys {
		return sqsonce.HashKey(key)
	}
	return key
}

// recordID is the id of key's record: "<Prefix>#<key>", or with HashKeys
// "<Prefix>#<sqsonce.HashKey(key)>", as the processor writes it.
func (r *Records) recordID(key string) string { return store.RecordID(r.Prefix, r.shownKey(key)) }

// where names the table, and its region when known, for messages.
func (r *Records) where() string {
	if r.Where != "" {
		return r.Where
	}
	if r.Region == "" {
		return "table " + r.Table
	}
	return "table " + r.Table + ", region " + r.Region
}

// Get reads key's record, strongly consistent: an operator deciding to
// release a lock must see the latest write. No record is ErrNotFound.
func (r *Records) Get(ctx context.Context, key string) (Record, error) {
	if key == "" {
		return Record{}, fmt.Errorf("%w: empty key", ErrUsage)
	}
	id := r.recordID(key)
	stored, err := r.store().Read(ctx, id)
	var bad *store.RecordError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Record{}, fmt.Errorf("key %q (record id %s in %s): %w: no record; %s", key, id, r.where(), ErrNotFound, r.otherID(ctx, key))
	case errors.As(err, &bad):
		// A record the protocol did not write (an unknown status, a lock
		// without an expiry) is still one the operator must see: the
		// store returns it as far as it reads, and describe says what is
		// wrong with it.
	case err != nil:
		return Record{}, r.fail("read record "+id+" in "+r.where(), err)
	}
	rec := r.record(key, stored)
	if r.HashKeys {
		rec.KeyHash = sqsonce.HashKey(key)
	}
	return rec, nil
}

// otherID says why a key has no record. A record under the other id, the
// key hashed when keys are not hashed or the reverse, means HashKeys does
// not match the processor's HASH_KEYS (or a hash from the logs was given
// as the key, with HashKeys): the operator is told which flag finds it
// rather than that the key was never processed. It costs one more read,
// only on this path.
func (r *Records) otherID(ctx context.Context, key string) string {
	const never = "the key was never processed under this prefix, or its record expired"
	other, found := store.RecordID(r.Prefix, key), "the unhashed id"
	fix := "the processor does not hash keys, or the key given is already a hash (as the logs show it); pass --hash-keys=false"
	if !r.HashKeys {
		other, found = store.RecordID(r.Prefix, sqsonce.HashKey(key)), "the hashed id"
		fix = "the processor hashes keys (HASH_KEYS=on); pass --hash-keys"
	}
	_, err := r.store().Read(ctx, other)
	var bad *store.RecordError
	if err != nil && !errors.As(err, &bad) {
		// Not there, or unreadable: the first answer stands.
		return never
	}
	return fmt.Sprintf("it was found under %s %s instead: %s", found, other, fix)
}

// record is stored in plain terms, judged by the clock now.
func (r *Records) record(key string, stored store.Record) Record {
	now := r.Now()
	rec := Record{Key: key, RecordID: stored.ID, Status: stored.Status, Owner: stored.Owner, Fence: stored.Fence, stored: stored}
	if !stored.ExpiresAt.IsZero() {
		t := stored.ExpiresAt
		rec.ExpiresAt = &t
	}
	switch stored.Status {
	case store.StatusProcessing:
		if stored.LockExpiresAt.IsZero() {
			// A lock without an expiry is not one the protocol wrote:
			// treat it as live, the safe reading.
			rec.Live = true
			break
		}
		t := stored.LockExpiresAt
		rec.LockExpiresAt = &t
		rec.Live = stored.Live(now)
		if rec.Live {
			rec.Remaining = t.Sub(now)
		}
	case store.StatusCompleted:
		if rec.ExpiresAt != nil && rec.ExpiresAt.After(now) {
			rec.Remaining = rec.ExpiresAt.Sub(now)
		}
	}
	if stored.Outbox != nil {
		pending, err := pendingMessages(stored)
		if err != nil {
			rec.PendingError = err.Error()
		}
		rec.Pending = pending
	}
	return rec
}

// LiveLockError is release's refusal of a lock that has not expired.
type LiveLockError struct{ Record Record }

func (e *LiveLockError) Error() string {
	until := "no expiry recorded"
	if e.Record.LockExpiresAt != nil {
		until = fmt.Sprintf("for %s more, until %s", e.Record.Remaining.Round(time.Second), e.Record.LockExpiresAt.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("key %q is locked by owner %s (fence %d) %s: a processor may be running its handler right now. "+
		"Wait for the lock to expire (the processor then takes it over itself), or release it with --force. "+
		"--force risks a second side effect: another message with this key can run the handler while the holder is still running "+
		"(the holder learns it only at its next lock renewal, which cancels its handler as lock lost; a side effect already under way goes on)",
		e.Record.Key, e.Record.Owner, e.Record.Fence, until)
}

func (e *LiveLockError) Is(target error) bool { return target == ErrRefused }

// StateError is a command refused because the record is not in the state
// the command is for.
type StateError struct {
	Record Record
	Want   store.Status
	Hint   string
}

func (e *StateError) Error() string {
	return fmt.Sprintf("key %q is %s, not %s: %s", e.Record.Key, e.Record.Status, e.Want, e.Hint)
}

func (e *StateError) Is(target error) bool { return target == ErrRefused }

// Release frees a stuck PROCESSING lock with the store's own release, the
// one the processor makes after a failure, on the lease read from the
// record: the write is conditional on the record still being that owner's
// lock, so a lock taken over meanwhile is never touched, and a record
// written before fencing (no fence attribute) is released like any other.
// It returns the lock as it was read, before the release.
//
// The record becomes RELEASED rather than deleted: the processor takes a
// RELEASED key at once, and the record keeps its fence, so the next
// holder's fence is still above the released holder's (a deleted record
// restarts from the clock; README, "Fencing token").
func (r *Records) Release(ctx context.Context, key string, force bool) (Record, error) {
	rec, err := r.Get(ctx, key)
	if err != nil {
		return Record{}, err
	}
	if rec.Status != store.StatusProcessing {
		hint := "there is no lock to release"
		if rec.Status == store.StatusCompleted {
			hint = "the key is done; sqs-once forget lets it run again"
		}
		return rec, &StateError{Record: rec, Want: store.StatusProcessing, Hint: hint}
	}
	if rec.Live && !force {
		return rec, &LiveLockError{Record: rec}
	}
	// A record gone, or already released by this owner (this call's own
	// write retried after a lost answer, or the holder's), is a success.
	lease := store.Lease{ID: rec.RecordID, Owner: rec.Owner, Fence: rec.Fence}
	switch err := r.store().Release(ctx, lease, r.Now()); {
	case errors.Is(err, sqsonce.ErrLockLost):
		return rec, r.changed(ctx, rec)
	case err != nil:
		return rec, r.fail("release "+rec.RecordID+" in "+r.where(), err)
	}
	return rec, nil
}

// Forget deletes a COMPLETED record so that the key runs again. confirm is
// asked with the record read; false cancels with ErrDeclined. The delete is
// the store's, conditional on the record being the completion that was
// read, which it returns.
func (r *Records) Forget(ctx context.Context, key string, confirm func(Record) (bool, error)) (Record, error) {
	rec, err := r.Get(ctx, key)
	if err != nil {
		return Record{}, err
	}
	if rec.Status != store.StatusCompleted {
		hint := "only a completed key can be forgotten"
		if rec.Status == store.StatusProcessing {
			hint = "it is being processed or stuck; see sqs-once release"
		}
		return rec, &StateError{Record: rec, Want: store.StatusCompleted, Hint: hint}
	}
	ok, err := confirm(rec)
	if err != nil {
		return rec, err
	}
	if !ok {
		return rec, fmt.Errorf("forget %q: %w", key, ErrDeclined)
	}
	// Gone already (this call's own delete retried, or another
	// operator's) is a success: either way the key is forgotten.
	switch err := r.store().Forget(ctx, rec.stored); {
	case errors.Is(err, store.ErrRecordChanged):
		return rec, r.changed(ctx, rec)
	case err != nil:
		return rec, r.fail("forget "+rec.RecordID+" in "+r.where(), err)
	}
	return rec, nil
}

// changed is the refusal of a write because the record is no longer the one
// read. It reads the record again to say what it is now: the store's
// refusal says it only in words.
func (r *Records) changed(ctx context.Context, was Record) error {
	now := "gone"
	switch n, err := r.store().Read(ctx, was.RecordID); {
	case err == nil:
		now = n.String()
	case !errors.Is(err, store.ErrNotFound):
		now = "unreadable (" + err.Error() + ")"
	}
	return fmt.Errorf("key %q was %s (owner %s, fence %d) when read and is now %s: %w; nothing was written, inspect it again",
		was.Key, was.Status, was.Owner, was.Fence, now, ErrChanged)
}

// Locks lists this prefix's PROCESSING records with the store's own scan
// (store.Admin's Locks), calling progress with the records looked at so
// far; the earliest expiry (or none recorded) first. A scan reads the
// whole store (a DynamoDB table's items, a Redis server's keys, a
// PostgreSQL table's rows: its cost is the store's size), which is why
// status does it only when asked.
func (r *Records) Locks(ctx context.Context, progress func(scanned, found int)) ([]Record, error) {
	found, err := r.store().Locks(ctx, r.Prefix, progress)
	if err != nil {
		return nil, r.fail("scan "+r.where(), err)
	}
	locks := make([]Record, 0, len(found))
	for _, s := range found {
		rec := r.record(strings.TrimPrefix(s.ID, r.Prefix+"#"), s)
		if r.HashKeys {
			rec.KeyHash = rec.Key
		}
		locks = append(locks, rec)
	}
	return locks, nil
}
