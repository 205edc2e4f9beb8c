package sqsonce

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/internal/testclock"
	"github.com/sqs-once/sqs-once/sqsonce/sqsoncetest"
	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// The lock tests (lock_*_test.go) run the protocol on every store in
// lockBackends: the in-memory one always, so that they need only Go, and
// DynamoDB on moto_server under the integration tag
// (lock_helpers_integration_test.go), where they ran before the Store seam.

// lockPrefix is the KeyPrefix of the lock tests' records.
const lockPrefix = "orders-fn"

// lockID is the record id of key under lockPrefix.
func lockID(key string) string { return store.RecordID(lockPrefix, key) }

// lockEnv is one test's table, seen as the holders see it, and its clock.
type lockEnv struct {
	clock *testclock.Clock
	// store is a holder's store: its table calls are counted in calls.
	store store.Store
	// newStore is another holder's store on the same table, as separate
	// Lambda execution environments have; its calls are counted too.
	newStore func() store.Store
	// uncounted is a store on the same table whose calls are not counted:
	// another holder's, in a test that counts the first one's calls.
	uncounted store.Store
	// calls is how many table calls the counted stores made.
	calls *atomic.Int32
	// read is the record under id, read past the counter; false when there
	// is none.
	read func(t *testing.T, id string) (store.Record, bool)
	// put writes rec as another holder would have written it.
	put func(t *testing.T, rec store.Record)
	// remove deletes the record under id, as TTL or an operator does.
	remove func(t *testing.T, id string)
}

// lockBackend makes a lockEnv on one kind of store.
type lockBackend struct {
	name string
	env  func(t testing.TB) *lockEnv
}

var lockBackends = []lockBackend{{"memory", newLockMemoryEnv}}

// lockOnEachStore runs test on every backend, in parallel.
func lockOnEachStore(t *testing.T, test func(t *testing.T, e *lockEnv)) {
	t.Parallel()
	for _, b := range lockBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			test(t, b.env(t))
		})
	}
}

// newLockMemoryEnv is a lockEnv on sqsoncetest's store. The store's own
// clock, which only its TTL reads, stays where it starts unless remove moves
// it: records outlive their expiry, as DynamoDB's TTL lets them.
func newLockMemoryEnv(testing.TB) *lockEnv {
	mem := sqsoncetest.NewStore()
	calls := new(atomic.Int32)
	counted := func() store.Store { return lockCountingStore{Store: mem, calls: calls} }
	return &lockEnv{
		clock:     testclock.New(mem.Now()),
		store:     counted(),
		newStore:  counted,
		uncounted: mem,
		calls:     calls,
		read: func(_ *testing.T, id string) (store.Record, bool) {
			rec, ok := mem.Records()[id]
			return rec, ok
		},
		put: func(_ *testing.T, rec store.Record) { mem.Put(rec) },
		remove: func(t *testing.T, id string) {
			rec, ok := mem.Records()[id]
			if !ok {
				t.Fatalf("no record %s to remove", id)
			}
			// The memory store's TTL, the one way it deletes a record.
			mem.Advance(rec.ExpiresAt.Sub(mem.Now()) + time.Second)
			if _, ok := mem.Records()[id]; ok {
				t.Fatalf("record %s outlived its TTL", id)
			}
		},
	}
}

// lockCountingStore counts the calls a holder makes to its store.
type lockCountingStore struct {
	store.Store
	calls *atomic.Int32
}

func (s lockCountingStore) Acquire(ctx context.Context, req store.AcquireRequest) (store.Lease, error) {
	s.calls.Add(1)
	return s.Store.Acquire(ctx, req)
}

func (s lockCountingStore) Renew(ctx context.Context, lease store.Lease, lockUntil time.Time) (store.Lease, error) {
	s.calls.Add(1)
	return s.Store.Renew(ctx, lease, lockUntil)
}

func (s lockCountingStore) Complete(ctx context.Context, lease store.Lease, c store.Completion) error {
	s.calls.Add(1)
	return s.Store.Complete(ctx, lease, c)
}

func (s lockCountingStore) Release(ctx context.Context, lease store.Lease, now time.Time) error {
	s.calls.Add(1)
	return s.Store.Release(ctx, lease, now)
}

func (s lockCountingStore) Read(ctx context.Context, id string) (store.Record, error) {
	s.calls.Add(1)
	return s.Store.Read(ctx, id)
}

// lockQuiet discards the log of the processors the tests build.
var lockQuiet = slog.New(slog.DiscardHandler)

// lockConfig is the lock tests' configuration: a 30 s lock, a window of an
// hour, the test's clock.
func (e *lockEnv) lockConfig(st store.Store) Config {
	return Config{Store: st, KeyPrefix: lockPrefix, LockTimeout: 30 * time.Second, DedupeWindow: time.Hour, Logger: lockQuiet, Test: TestConfig{Now: e.clock.Now}}
}

// locker is the locker New builds for a holder on store, configured as
// lockConfig and then configure say. Its renewals wait on real timers, which
// never fire within a test (see lockRenewing for the test's clock), and it
// retries a completion without waiting.
func (e *lockEnv) locker(t testing.TB, st store.Store, configure ...func(*Config)) *locker {
	t.Helper()
	cfg := e.lockConfig(st)
	for _, c := range configure {
		c(&cfg)
	}
	return lockNewLocker(t, cfg, nil)
}

// lockNewLocker is the locker New builds for cfg (through the same
// constructor), with the renewal's timer after (nil: the real one) and a
// completion retried without waiting.
func lockNewLocker(t testing.TB, cfg Config, after func(time.Duration) <-chan time.Time) *locker {
	t.Helper()
	p, err := newDo(cfg, deps{after: after, sleep: lockNoSleep})
	if err != nil {
		t.Fatal(err)
	}
	return p.lock
}

// noResult is fn as the locker runs it: a function with no result, as Do's.
func noResult(fn func(context.Context) error) func(context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) { return nil, fn(ctx) }
}

func lockNoSleep(context.Context, time.Duration) error { return nil }

func lockSucceed(context.Context) error { return nil }

// firstFence is the fence of a record's first acquisition at the test's
// current time: the clock in milliseconds, plus one.
func (e *lockEnv) firstFence() int64 { return store.FenceSeed(e.clock.Now()) + 1 }

// status is the record's status, "" when there is no record.
func (e *lockEnv) status(t *testing.T, id string) store.Status {
	t.Helper()
	rec, _ := e.read(t, id)
	return rec.Status
}

// acquire takes key's lock directly on store, as owner, until now + d: a
// holder that then crashed, or is paused.
func (e *lockEnv) acquire(t *testing.T, st store.Store, owner, key, hash string, d time.Duration) store.Lease {
	t.Helper()
	now := e.clock.Now()
	lease, err := st.Acquire(context.Background(), store.AcquireRequest{ID: lockID(key), Owner: owner, PayloadHash: hash, Now: now, LockUntil: now.Add(d)})
	if err != nil {
		t.Fatalf("acquire %s as %s: %v", key, owner, err)
	}
	return lease
}

// lockRenewing is a locker whose 30 s lock is renewed on the test's clock,
// and a function that runs until the test lets it finish.
type lockRenewing struct {
	clock   *testclock.Clock
	locker  *locker
	started chan struct{}
	finish  chan error
}

// newLockRenewing renews a 30 s lock on store, on e's clock.
func newLockRenewing(t testing.TB, e *lockEnv, st store.Store) lockRenewing {
	t.Helper()
	return lockRenewing{
		clock:   e.clock,
		locker:  lockNewLocker(t, e.lockConfig(st), e.clock.After),
		started: make(chan struct{}),
		finish:  make(chan error),
	}
}

// slow runs until the test sends its result, or its context ends.
func (r lockRenewing) slow(ctx context.Context) error {
	close(r.started)
	select {
	case err := <-r.finish:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// run starts slow under key's lock, and returns once it runs.
func (r lockRenewing) run(key string) <-chan lockResult {
	done := make(chan lockResult)
	go func() { done <- r.locker.do(context.Background(), key, "", 0, noResult(r.slow)) }()
	<-r.started
	return done
}

// tick moves the clock a renewal interval on, once the renewal is waiting,
// and returns once the renewal has run and waits again.
func (r lockRenewing) tick(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.clock.WaitForWaiters(ctx, 1); err != nil {
		t.Fatalf("renewal not waiting: %v", err)
	}
	r.clock.Advance(10 * time.Second)
	if err := r.clock.WaitForWaiters(ctx, 1); err != nil {
		t.Fatalf("renewal did not come back: %v", err)
	}
}
