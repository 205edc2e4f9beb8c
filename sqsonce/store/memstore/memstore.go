package memstore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sqs-once/sqs-once/internal/testclock"
	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// Store is an in-memory store.Store with the DynamoDB store's semantics:
// the same conditions, the same recognition of a repeated call, the same
// fence rules. It judges locks and windows by the times its callers pass,
// as DynamoDB judges them by the values a request carries, and keeps a
// clock of its own (Now, Advance) for what DynamoDB does by itself: TTL,
// which deletes a record once the clock passes its ExpiresAt (DynamoDB does
// it up to days later; the protocol allows either). Pass its Now as
// sqsonce.Config.Test.Now, and Advance moves the processor's time and the
// store's together. Safe for concurrent use.
type Store struct {
	mu      sync.Mutex
	clock   *testclock.Clock
	records map[string]store.Record
	// committed are the writes of committed transactions, by record id.
	committed map[string][]any
}

var (
	_ store.Store      = (*Store)(nil)
	_ store.Admin      = (*Store)(nil)
	_ store.Transactor = (*Store)(nil)
)

// New returns an empty store whose clock starts at the current time,
// truncated to the millisecond (the resolution of a lock's expiry).
func New() *Store {
	return &Store{clock: testclock.New(time.Now().Truncate(time.Millisecond)), records: map[string]store.Record{}, committed: map[string][]any{}}
}

// Now is the store's clock.
func (s *Store) Now() time.Time { return s.clock.Now() }

// Advance moves the store's clock on by d.
func (s *Store) Advance(d time.Duration) { s.clock.Advance(d) }

// Records returns a copy of every record, by id: what a test asserts on.
func (s *Store) Records() map[string]store.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire()
	out := make(map[string]store.Record, len(s.records))
	for id, rec := range s.records {
		rec.Result, rec.Outbox = bytes.Clone(rec.Result), bytes.Clone(rec.Outbox)
		out[id] = rec
	}
	return out
}

// Put writes rec as it is, for a test that starts from a record the
// protocol did not write (one from an older version, say).
func (s *Store) Put(rec store.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec.Result, rec.Outbox = bytes.Clone(rec.Result), bytes.Clone(rec.Outbox)
	s.records[rec.ID] = rec
}

// expire is TTL: records whose ExpiresAt is past the store's clock are gone.
func (s *Store) expire() {
	now := s.clock.Now()
	for id, rec := range s.records {
		if !rec.ExpiresAt.IsZero() && rec.ExpiresAt.Before(now) {
			delete(s.records, id)
		}
	}
}

// get is the record under id, after TTL, with a copy of its result: what
// a caller receives is its own, as a record read over the wire is.
func (s *Store) get(id string) (store.Record, bool) {
	s.expire()
	rec, ok := s.records[id]
	rec.Result, rec.Outbox = bytes.Clone(rec.Result), bytes.Clone(rec.Outbox)
	return rec, ok
}

func checkID(op, id string) error {
	if id == "" {
		return &store.StoreError{Op: op, ID: id, Err: fmt.Errorf("%w: empty record id", store.ErrMisconfigured)}
	}
	return nil
}

// Acquire implements store.Store.
func (s *Store) Acquire(ctx context.Context, req store.AcquireRequest) (store.Lease, error) {
	if err := ctx.Err(); err != nil {
		return store.Lease{}, &store.StoreError{Op: "acquire", ID: req.ID, Err: err}
	}
	if err := checkID("acquire", req.ID); err != nil {
		return store.Lease{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.get(req.ID)
	if exists && old.Blocks(req.Now) {
		if old.Status == store.StatusProcessing && old.Owner == req.Owner {
			return store.Lease{ID: req.ID, Owner: req.Owner, Fence: old.Fence, LockExpiresAt: req.LockUntil}, nil
		}
		return store.Lease{}, &store.HeldError{Record: old}
	}
	fence := store.FenceSeed(req.Now) + 1
	if exists && old.Fence != 0 {
		fence = old.Fence + 1
	}
	s.records[req.ID] = store.Record{
		ID: req.ID, Status: store.StatusProcessing, Owner: req.Owner, Fence: fence,
		LockExpiresAt: req.LockUntil.Truncate(time.Millisecond),
		ExpiresAt:     ttl(req.LockUntil.Add(store.FenceRetention)),
		PayloadHash:   req.PayloadHash,
	}
	return store.Lease{
		ID: req.ID, Owner: req.Owner, Fence: fence, LockExpiresAt: req.LockUntil,
		TookOver: exists && old.Status != store.StatusReleased,
	}, nil
}

// Renew implements store.Store.
func (s *Store) Renew(ctx context.Context, lease store.Lease, lockUntil time.Time) (store.Lease, error) {
	if err := ctx.Err(); err != nil {
		return lease, &store.StoreError{Op: "renew", ID: lease.ID, Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.get(lease.ID)
	if !ok || rec.Owner != lease.Owner || rec.Status != store.StatusProcessing {
		return lease, lost("renew", lease, rec, ok)
	}
	rec.LockExpiresAt = lockUntil.Truncate(time.Millisecond)
	rec.ExpiresAt = ttl(lockUntil.Add(store.FenceRetention))
	s.records[lease.ID] = rec
	lease.LockExpiresAt = lockUntil
	return lease, nil
}

// Complete implements store.Store.
func (s *Store) Complete(ctx context.Context, lease store.Lease, c store.Completion) error {
	if err := ctx.Err(); err != nil {
		return &store.StoreError{Op: "complete", ID: lease.ID, Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.get(lease.ID)
	if !ok || rec.Owner != lease.Owner {
		return lost("complete", lease, rec, ok)
	}
	s.records[lease.ID] = completed(rec, c)
	return nil
}

// completed is rec completed with c: COMPLETED until c.Until in whole
// seconds, the lock expiry removed, copies of the result and outbox (the
// caller may reuse its slices, as it may a request sent over the wire).
func completed(rec store.Record, c store.Completion) store.Record {
	rec.Status = store.StatusCompleted
	rec.ExpiresAt = time.Unix(c.Until.Unix(), 0)
	rec.LockExpiresAt = time.Time{}
	rec.Result = bytes.Clone(c.Result)
	rec.Outbox = bytes.Clone(c.Outbox)
	return rec
}

// MarkSent implements store.Store.
func (s *Store) MarkSent(ctx context.Context, rec store.Record) error {
	if err := ctx.Err(); err != nil {
		return &store.StoreError{Op: "mark sent", ID: rec.ID, Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now, ok := s.get(rec.ID)
	switch {
	case !ok:
		return nil
	case now.Status != store.StatusCompleted || now.Owner != rec.Owner || now.Fence != rec.Fence:
		return &store.StoreError{Op: "mark sent", ID: rec.ID, Err: fmt.Errorf("%w: the record is %s, not the completion %s", store.ErrRecordChanged, now, rec)}
	}
	now.Outbox = nil
	s.records[rec.ID] = now
	return nil
}

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, lease store.Lease, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return &store.StoreError{Op: "release", ID: lease.ID, Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.get(lease.ID)
	switch {
	case !ok, rec.Status == store.StatusReleased && rec.Owner == lease.Owner:
		return nil
	case rec.Owner != lease.Owner || rec.Status != store.StatusProcessing:
		return lost("release", lease, rec, ok)
	}
	rec.Status = store.StatusReleased
	rec.LockExpiresAt = time.UnixMilli(0)
	rec.ExpiresAt = ttl(now.Add(store.FenceRetention))
	s.records[lease.ID] = rec
	return nil
}

// Read implements store.Store.
func (s *Store) Read(ctx context.Context, id string) (store.Record, error) {
	if err := ctx.Err(); err != nil {
		return store.Record{}, &store.StoreError{Op: "read", ID: id, Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.get(id)
	if !ok {
		return store.Record{}, fmt.Errorf("record %q: %w", id, store.ErrNotFound)
	}
	return rec, nil
}

// Forget implements store.Admin.
func (s *Store) Forget(ctx context.Context, rec store.Record) error {
	if err := ctx.Err(); err != nil {
		return &store.StoreError{Op: "forget", ID: rec.ID, Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now, ok := s.get(rec.ID)
	switch {
	case !ok:
		return nil
	case now.Status != store.StatusCompleted || now.Owner != rec.Owner:
		return fmt.Errorf("record %q was %s when read and is now %s: %w", rec.ID, rec, now, store.ErrRecordChanged)
	}
	delete(s.records, rec.ID)
	return nil
}

// Locks implements store.Admin.
func (s *Store) Locks(ctx context.Context, prefix string, progress func(scanned, found int)) ([]store.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, &store.StoreError{Op: "scan", ID: prefix + "#", Err: err}
	}
	s.mu.Lock()
	s.expire()
	var locks []store.Record
	for id, rec := range s.records {
		if rec.Status == store.StatusProcessing && strings.HasPrefix(id, prefix+"#") {
			rec.Result = bytes.Clone(rec.Result)
			locks = append(locks, rec)
		}
	}
	scanned := len(s.records)
	s.mu.Unlock()
	// The earliest expiry first, ties by id: a map has no order of its own.
	slices.SortFunc(locks, func(a, b store.Record) int {
		if c := a.LockExpiresAt.Compare(b.LockExpiresAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if progress != nil {
		progress(scanned, len(locks))
	}
	return locks, nil
}

func lost(op string, lease store.Lease, rec store.Record, exists bool) error {
	what := "the record is gone"
	if exists {
		what = "the record is " + rec.String()
	}
	return fmt.Errorf("%s %q: %w (%s)", op, lease.ID, store.ErrLockLost, what)
}

// ttl rounds up to the second, as the DynamoDB store writes its TTL.
func ttl(t time.Time) time.Time {
	if s := time.Unix(t.Unix(), 0); s.Before(t) {
		return s.Add(time.Second)
	}
	return time.Unix(t.Unix(), 0)
}
