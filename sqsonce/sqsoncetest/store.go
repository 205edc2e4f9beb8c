package sqsoncetest

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sqs-once/sqs-once/internal/leasectx"
	"github.com/sqs-once/sqs-once/sqsonce"
)

// Store is an in-memory sqsonce.Store with the DynamoDB store's semantics:
// the same conditions, the same recognition of a repeated call, the same
// fence rules. It judges locks and windows by the times its callers pass,
// as DynamoDB judges them by the values a request carries, and keeps a
// clock of its own (Now, Advance) for what DynamoDB does by itself: TTL,
// which deletes a record once the clock passes its ExpiresAt (DynamoDB does
// it up to days later; the protocol allows either). Pass its Now as
// sqsonce.Config.Now, and Advance moves the processor's time and the
// store's together. Safe for concurrent use.
type Store struct {
	mu      sync.Mutex
	now     time.Time
	records map[string]sqsonce.Record
}

var _ sqsonce.Store = (*Store)(nil)

// NewStore returns an empty store whose clock starts at the current time,
// truncated to the millisecond (the resolution of a lock's expiry).
func NewStore() *Store {
	return &Store{now: time.Now().Truncate(time.Millisecond), records: map[string]sqsonce.Record{}}
}

// Now is the store's clock.
func (s *Store) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// Advance moves the store's clock on by d.
func (s *Store) Advance(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.now.Add(d)
}

// Records returns a copy of every record, by id: what a test asserts on.
func (s *Store) Records() map[string]sqsonce.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire()
	out := make(map[string]sqsonce.Record, len(s.records))
	for id, rec := range s.records {
		rec.Result = bytes.Clone(rec.Result)
		out[id] = rec
	}
	return out
}

// Put writes rec as it is, for a test that starts from a record the
// protocol did not write (one from an older version, say).
func (s *Store) Put(rec sqsonce.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec.Result = bytes.Clone(rec.Result)
	s.records[rec.ID] = rec
}

// expire is TTL: records whose ExpiresAt is past the store's clock are gone.
func (s *Store) expire() {
	for id, rec := range s.records {
		if !rec.ExpiresAt.IsZero() && rec.ExpiresAt.Before(s.now) {
			delete(s.records, id)
		}
	}
}

// get is the record under id, after TTL, with a copy of its result: what
// a caller receives is its own, as a record read over the wire is.
func (s *Store) get(id string) (sqsonce.Record, bool) {
	s.expire()
	rec, ok := s.records[id]
	rec.Result = bytes.Clone(rec.Result)
	return rec, ok
}

func checkID(op, id string) error {
	if id == "" {
		return &sqsonce.StoreError{Op: op, ID: id, Err: fmt.Errorf("%w: empty record id", sqsonce.ErrMisconfigured)}
	}
	return nil
}

// Acquire implements sqsonce.Store.
func (s *Store) Acquire(ctx context.Context, req sqsonce.AcquireRequest) (sqsonce.Lease, error) {
	if err := ctx.Err(); err != nil {
		return sqsonce.Lease{}, &sqsonce.StoreError{Op: "acquire", ID: req.ID, Err: err}
	}
	if err := checkID("acquire", req.ID); err != nil {
		return sqsonce.Lease{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.get(req.ID)
	if exists && old.Blocks(req.Now) {
		if old.Status == sqsonce.StatusProcessing && old.Owner == req.Owner {
			return sqsonce.Lease{ID: req.ID, Owner: req.Owner, Fence: old.Fence, LockExpiresAt: req.LockUntil}, nil
		}
		return sqsonce.Lease{}, &sqsonce.HeldError{Record: old}
	}
	fence := sqsonce.FenceSeed(req.Now) + 1
	if exists && old.Fence != 0 {
		fence = old.Fence + 1
	}
	s.records[req.ID] = sqsonce.Record{
		ID: req.ID, Status: sqsonce.StatusProcessing, Owner: req.Owner, Fence: fence,
		LockExpiresAt: req.LockUntil.Truncate(time.Millisecond),
		ExpiresAt:     ttl(req.LockUntil.Add(sqsonce.FenceRetention)),
		PayloadHash:   req.PayloadHash,
	}
	return sqsonce.Lease{
		ID: req.ID, Owner: req.Owner, Fence: fence, LockExpiresAt: req.LockUntil,
		TookOver: exists && old.Status != sqsonce.StatusReleased,
	}, nil
}

// Renew implements sqsonce.Store.
func (s *Store) Renew(ctx context.Context, lease sqsonce.Lease, lockUntil time.Time) (sqsonce.Lease, error) {
	if err := ctx.Err(); err != nil {
		return lease, &sqsonce.StoreError{Op: "renew", ID: lease.ID, Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.get(lease.ID)
	if !ok || rec.Owner != lease.Owner || rec.Status != sqsonce.StatusProcessing {
		return lease, lost("renew", lease, rec, ok)
	}
	rec.LockExpiresAt = lockUntil.Truncate(time.Millisecond)
	rec.ExpiresAt = ttl(lockUntil.Add(sqsonce.FenceRetention))
	s.records[lease.ID] = rec
	lease.LockExpiresAt = lockUntil
	return lease, nil
}

// Complete implements sqsonce.Store.
func (s *Store) Complete(ctx context.Context, lease sqsonce.Lease, until time.Time, result []byte) error {
	if err := ctx.Err(); err != nil {
		return &sqsonce.StoreError{Op: "complete", ID: lease.ID, Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.get(lease.ID)
	if !ok || rec.Owner != lease.Owner {
		return lost("complete", lease, rec, ok)
	}
	rec.Status = sqsonce.StatusCompleted
	rec.ExpiresAt = time.Unix(until.Unix(), 0)
	rec.LockExpiresAt = time.Time{}
	// A copy: the caller may reuse its slice, as it may with a request
	// sent over the wire.
	rec.Result = bytes.Clone(result)
	s.records[lease.ID] = rec
	return nil
}

// Release implements sqsonce.Store.
func (s *Store) Release(ctx context.Context, lease sqsonce.Lease, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return &sqsonce.StoreError{Op: "release", ID: lease.ID, Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.get(lease.ID)
	switch {
	case !ok, rec.Status == sqsonce.StatusReleased && rec.Owner == lease.Owner:
		return nil
	case rec.Owner != lease.Owner || rec.Status != sqsonce.StatusProcessing:
		return lost("release", lease, rec, ok)
	}
	rec.Status = sqsonce.StatusReleased
	rec.LockExpiresAt = time.UnixMilli(0)
	rec.ExpiresAt = ttl(now.Add(sqsonce.FenceRetention))
	s.records[lease.ID] = rec
	return nil
}

// Read implements sqsonce.Store.
func (s *Store) Read(ctx context.Context, id string) (sqsonce.Record, error) {
	if err := ctx.Err(); err != nil {
		return sqsonce.Record{}, &sqsonce.StoreError{Op: "read", ID: id, Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.get(id)
	if !ok {
		return sqsonce.Record{}, fmt.Errorf("record %q: %w", id, sqsonce.ErrNotFound)
	}
	return rec, nil
}

// Forget implements sqsonce.Store.
func (s *Store) Forget(ctx context.Context, rec sqsonce.Record) error {
	if err := ctx.Err(); err != nil {
		return &sqsonce.StoreError{Op: "forget", ID: rec.ID, Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now, ok := s.get(rec.ID)
	switch {
	case !ok:
		return nil
	case now.Status != sqsonce.StatusCompleted || now.Owner != rec.Owner:
		return fmt.Errorf("record %q was %s when read and is now %s: %w", rec.ID, rec, now, sqsonce.ErrRecordChanged)
	}
	delete(s.records, rec.ID)
	return nil
}

func lost(op string, lease sqsonce.Lease, rec sqsonce.Record, exists bool) error {
	what := "the record is gone"
	if exists {
		what = "the record is " + rec.String()
	}
	return fmt.Errorf("%s %q: %w (%s)", op, lease.ID, sqsonce.ErrLockLost, what)
}

// ttl rounds up to the second, as the DynamoDB store writes its TTL.
func ttl(t time.Time) time.Time {
	if s := time.Unix(t.Unix(), 0); s.Before(t) {
		return s.Add(time.Second)
	}
	return time.Unix(t.Unix(), 0)
}

// Context returns ctx carrying key and fence as sqsonce.Key and
// sqsonce.Fence read them: for a Handler's own unit test, which calls the
// Handler directly, without a Processor.
func Context(ctx context.Context, key string, fence int64) context.Context {
	return leasectx.With(ctx, leasectx.Lease{Key: key, Fence: fence})
}
