package store

import (
	"context"
	"fmt"
	"time"
)

// Store keeps the lock records of the protocol: one record per key, under
// the id "<KeyPrefix>#<key>" (RecordID). Package dynamostore is the store
// on a DynamoDB table, redisstore the one on Redis, memstore one in memory
// for tests; storetest.TestStore is the suite a Store of your own must
// pass. A Store may also implement Checker, which sqsonce's
// Processor.Check calls, and Admin, which the operator's CLI calls.
//
// Every method is one atomic step on one record, and every one must be safe
// to repeat: a client retries a call whose answer was lost after the store
// applied it, so each method recognises its own earlier attempt (by the
// owner token the caller chose) instead of mistaking it for another
// holder's work. Times are the caller's clock: a store compares them with
// what the record holds, as a DynamoDB condition compares values sent in
// the request.
type Store interface {
	// Acquire takes the lock on req.ID until req.LockUntil, moving the
	// record's fence on by one (a new record starts it at req.Now in
	// milliseconds, plus one). It succeeds when there is no record, the
	// record is RELEASED, its lock expired (LockExpiresAt before req.Now, in
	// milliseconds), or its COMPLETED window ended (ExpiresAt before
	// req.Now, in whole seconds). The new lock carries no result, whatever
	// the record it replaces held. Otherwise it returns a *HeldError with
	// the record that refused it (with its Result), except that a live lock whose Owner is req.Owner is this
	// call's own earlier attempt: Acquire returns that lease, its fence not
	// moved again.
	Acquire(ctx context.Context, req AcquireRequest) (Lease, error)
	// Renew moves the lease's lock expiry to lockUntil, if the record is
	// still the lease's PROCESSING lock; otherwise it returns an error
	// matching ErrLockLost.
	Renew(ctx context.Context, lease Lease, lockUntil time.Time) (Lease, error)
	// Complete marks the record COMPLETED until c.Until (ExpiresAt, kept in
	// whole seconds: c.Until.Unix()), removes its lock expiry and stores
	// c.Result and c.Outbox with it (nil: none), in the same write, if the
	// record's owner is still the lease's; otherwise an error matching
	// ErrLockLost. A repeat of an applied Complete succeeds again. The
	// caller keeps len(c.Result)+len(c.Outbox) within MaxResultSize.
	Complete(ctx context.Context, lease Lease, c Completion) error
	// Release marks the lease's PROCESSING lock RELEASED (free to take at
	// once, its fence kept) and lets it expire FenceRetention after now. A
	// record already RELEASED by the same owner (a repeat) or gone is a
	// success; a record held by another owner, or no longer PROCESSING, is
	// an error matching ErrLockLost. The operator's release is this call
	// with the lease read from the record.
	Release(ctx context.Context, lease Lease, now time.Time) error
	// MarkSent removes the outbox of rec's record (its messages are sent)
	// if the record is still the completion rec was read as: COMPLETED,
	// rec.Owner and rec.Fence. A record whose outbox is already removed, or
	// that is gone, is a success (a repeat, or another delivery marked it);
	// any other record is an error matching ErrRecordChanged, nothing
	// written: the outbox of a completion is never removed but by a caller
	// that sent it.
	MarkSent(ctx context.Context, rec Record) error
	// Read returns the record under id, as of the latest write (a strongly
	// consistent read), or an error matching ErrNotFound. A record the
	// protocol did not write comes back as far as it could be read, with a
	// *RecordError, so an operator still sees it.
	Read(ctx context.Context, id string) (Record, error)
}

// Admin is what an operator's tool (the sqs-once CLI) asks of a store
// beyond the hot path, with a type assertion: Store stays what the lock
// calls, so a store of your own need not have these. Every store that
// ships implements it; storetest.TestStore checks it where a store does.
type Admin interface {
	// Forget deletes rec's record if it is still the COMPLETED record of
	// rec.Owner, so that its key runs again. A record already gone is a
	// success; one that changed is an error matching ErrRecordChanged.
	Forget(ctx context.Context, rec Record) error
	// Locks lists the PROCESSING records whose ids start with prefix+"#",
	// the earliest expiry first, calling progress (when not nil) with the
	// records looked at and the locks found so far. It reads every record
	// of the store: its cost is the store's size. A lock the protocol did
	// not write is listed with its id, status and owner.
	Locks(ctx context.Context, prefix string, progress func(scanned, found int)) ([]Record, error)
}

// Checker is a store that can check its own set-up (a table's schema and
// TTL, a server's eviction policy), which sqsonce's Processor.Check calls.
type Checker interface {
	// Check reads the store's set-up once and returns an error that says
	// what is wrong with it (matching ErrMisconfigured when nothing works
	// as it is, ErrUnavailable when a retry may tell more), or nil.
	Check(ctx context.Context) error
}

// AcquireRequest is what Store.Acquire writes.
type AcquireRequest struct {
	// ID is the record id, "<KeyPrefix>#<key>".
	ID string
	// Owner identifies this acquisition: unique, chosen by the caller, and
	// the same on a repeat of the call.
	Owner string
	// PayloadHash is the hash of what the lock is taken for ("": none).
	// Acquire stores it; it does not compare it.
	PayloadHash string
	// Now is the caller's clock; LockUntil is when the lock may be taken
	// over.
	Now       time.Time
	LockUntil time.Time
}

// Completion is what Store.Complete and Tx.Commit write with a record's
// COMPLETED status.
type Completion struct {
	// Until is the end of the dedupe window (ExpiresAt, whole seconds).
	Until time.Time
	// Result is what the work returned (DoResult's, encoded), nil: none.
	Result []byte
	// Outbox is the messages the work staged (sqsonce.Emit), encoded by
	// sqsonce, nil: none. It is kept with the completion until MarkSent
	// removes it, once they are sent; a store treats it as opaque bytes.
	Outbox []byte
}

// Lease is one successful acquisition: the proof of ownership that Renew,
// Complete and Release present.
type Lease struct {
	ID    string
	Owner string
	// Fence is the fencing token of this acquisition: larger than every
	// earlier acquisition's of the record, one more than the last.
	Fence int64
	// LockExpiresAt is when another holder may take the key over.
	LockExpiresAt time.Time
	// TookOver is set when the record was held by a lock that had expired
	// or a completion whose window had ended.
	TookOver bool
}

// Status is the state of a record.
type Status string

// The states of a record.
const (
	// StatusProcessing is a lock: a holder is running the key's work until
	// LockExpiresAt, after which another may take it over.
	StatusProcessing Status = "PROCESSING"
	// StatusCompleted is a key whose work succeeded: a duplicate until
	// ExpiresAt.
	StatusCompleted Status = "COMPLETED"
	// StatusReleased is a lock given up after a failure: free to take at
	// once. The record stays so that its fence keeps growing.
	StatusReleased Status = "RELEASED"
)

// Record is one key's record, as a store holds it.
type Record struct {
	ID     string
	Status Status
	Owner  string
	// Fence is the last acquisition's fencing token; 0 on a record written
	// before fencing.
	Fence int64
	// LockExpiresAt is a PROCESSING record's lock expiry.
	LockExpiresAt time.Time
	// ExpiresAt is a COMPLETED record's window end; on a lock, when the
	// record may be deleted (FenceRetention after the lock).
	ExpiresAt time.Time
	// PayloadHash is the hash the lock was taken for ("": none).
	PayloadHash string
	// Result is what a COMPLETED record's work returned (DoResult stores
	// it, encoded as JSON), nil when it stored none.
	Result []byte
	// Outbox is a COMPLETED record's messages not yet marked sent (the
	// Completion's Outbox until MarkSent), nil when none.
	Outbox []byte
}

// MaxResultSize is the most bytes of result and outbox, together, that
// Store.Complete is given: DynamoDB's item limit (400 KB) less 8 KiB for
// the record's other attributes (the id, at most 2 KiB, and a few short
// ones). sqsonce's DoResult refuses a larger result, and Emit a larger
// outbox.
const MaxResultSize = 400*1024 - 8*1024

// Live reports whether rec is a lock that has not expired at now: a holder
// may be running its key's work. A lock is live up to and including its
// expiry, in milliseconds, since Acquire takes it over only once it is
// before now.
func (rec Record) Live(now time.Time) bool {
	return rec.Status == StatusProcessing && rec.LockExpiresAt.UnixMilli() >= now.UnixMilli()
}

// Blocks reports whether rec refuses an acquisition at now: a live lock, or
// a completion whose window has not ended (in whole seconds). It is the
// negation of the condition Store.Acquire writes under.
func (rec Record) Blocks(now time.Time) bool {
	switch rec.Status {
	case StatusProcessing:
		return rec.Live(now)
	case StatusCompleted:
		return rec.ExpiresAt.Unix() >= now.Unix()
	}
	return false
}

// FenceRetention is how long a lock's record outlives the lock before TTL
// may delete it (a completed record lives until its window ends): no holder
// can still be acting on a record that is deleted, and a record created
// again starts its fence from the clock, above every fence of the old one
// as long as the hosts' clocks agree within this time.
const FenceRetention = time.Hour

// FenceSeed is where a new record's fence starts: the clock in
// milliseconds (the first lease's fence is one more).
func FenceSeed(now time.Time) int64 { return now.UnixMilli() }

// RecordID is the id of key's record under prefix. With sqsonce's
// Config.HashKeys the key is sqsonce.HashKey(key).
func RecordID(prefix, key string) string { return prefix + "#" + key }

// String describes the record in one line, for errors and the CLI.
func (rec Record) String() string {
	return fmt.Sprintf("%s, owner %s, fence %d", rec.Status, rec.Owner, rec.Fence)
}
