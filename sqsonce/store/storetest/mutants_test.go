package storetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/memstore"
)

// The suite's own test: each rule of TestStore fails on a store mutated to
// break it. TestStore takes a *testing.T and fails it, so each mutant runs
// in a child process (this test binary again, running TestMutantChild on
// the mutant named by mutantEnv), and the parent reads which of the child's
// subtests failed.

// mutantEnv names the mutant TestMutantChild runs the suite on.
const mutantEnv = "SQSONCETEST_MUTANT"

// noMutant is the mutant that changes nothing: the memory store through the
// wrapper, which must pass, or the harness would pass anything.
const noMutant = "none"

// mutation is one bug: rules are TestStore's subtests that must fail on
// it (at least these; others may fail too).
type mutation struct {
	name  string
	bug   string
	rules []string
}

// mutants are the bugs the suite must catch, each rule's at least once.
var mutants = []mutation{
	{"fence-starts-at-one", "a new record's fence starts at 1, not from the clock (ADD fence 1)", []string{"AcquireNew", "FenceGrows"}},
	{"lock-expiry-in-seconds", "the lock's expiry is kept in whole seconds", []string{"AcquireNew"}},
	{"lock-ttl-without-retention", "a lock's record expires (TTL) with its lock, not FenceRetention later", []string{"AcquireNew"}},
	{"acquire-ignores-live-locks", "Acquire takes over another owner's live lock", []string{"OneLiveHolder"}},
	{"acquire-takes-over-at-expiry", "Acquire takes a lock over at exactly its expiry (<= for <)", []string{"OneLiveHolder"}},
	{"held-error-without-record", "the HeldError carries only the id and status", []string{"OneLiveHolder"}},
	{"held-error-not-typed", "a refusal is a plain error matching ErrInProgress or ErrDuplicate, not a *HeldError", []string{"OneLiveHolder"}},
	{"non-atomic-acquire", "Acquire reads, then writes unconditionally", []string{"ConcurrentAcquire"}},
	{"acquire-never-takes-over", "an expired lock refuses every other owner", []string{"TakeoverAfterExpiry"}},
	{"fence-not-incremented", "an acquisition of an existing record keeps its fence", []string{"TakeoverAfterExpiry", "FenceGrows"}},
	{"acquire-without-own-recognition", "a repeated Acquire finds its own live lock held", []string{"OwnAcquireRetry"}},
	{"own-retry-moves-fence", "a repeated Acquire of the same owner acquires again, fence moved", []string{"OwnAcquireRetry"}},
	{"renew-without-owner-check", "Renew extends whichever lock is there", []string{"Renew"}},
	{"renew-any-status", "Renew of the owner's COMPLETED or RELEASED record writes a lock expiry", []string{"Renew"}},
	{"renew-does-not-extend", "Renew answers success and writes nothing", []string{"Renew"}},
	{"complete-without-owner-check", "Complete completes whichever record is there", []string{"Complete"}},
	{"complete-rounds-window-up", "Complete keeps the window's end rounded up to the second", []string{"Complete"}},
	{"complete-repeat-fails", "a repeat of an applied Complete is ErrLockLost", []string{"Complete"}},
	{"window-never-ends", "a COMPLETED record refuses Acquire after its window", []string{"DedupeWindow"}},
	{"window-ends-a-second-early", "Acquire takes over a completion in its window's last second", []string{"DedupeWindow"}},
	{"release-without-owner-check", "Release releases whichever lock is there", []string{"Release"}},
	{"release-any-status", "Release of the owner's COMPLETED record makes it RELEASED", []string{"Release"}},
	{"release-deletes", "Release deletes the record (the old DeleteItem)", []string{"Release", "FenceGrows"}},
	{"release-repeat-fails", "a repeat of an applied Release is ErrLockLost", []string{"Release"}},
	{"release-gone-fails", "Release of a record that is gone is ErrLockLost", []string{"Release"}},
	{"acquire-after-release-is-a-takeover", "an Acquire of a RELEASED record says TookOver", []string{"Release"}},
	{"release-needs-lock-expiry", "Release refuses a lease whose LockExpiresAt is not the record's", []string{"OperatorRelease"}},
	{"release-needs-fence", "Release refuses a lease whose Fence is not the record's", []string{"GiveUpRelease"}},
	{"fence-restarts-after-delete", "a record created again restarts from its first fence", []string{"FenceGrows"}},
	{"payload-not-stored", "Acquire drops the payload hash", []string{"Payload"}},
	{"takeover-keeps-payload", "a takeover with no payload hash keeps the old one", []string{"Payload"}},
	{"read-stale", "Read returns the first version it read of a record", []string{"Read"}},
	{"read-missing-is-empty", "Read of no record returns a zero Record and no error", []string{"Read"}},
	{"forget-unconditional", "Forget deletes whatever record is there", []string{"Forget"}},
	{"locks-lists-every-record", "Locks lists completions and released locks too", []string{"Locks"}},
	{"locks-latest-first", "Locks lists the latest expiry first", []string{"Locks"}},
	{"locks-prefix-unbounded", "Locks matches ids that start with the prefix, without its '#'", []string{"Locks"}},
	{"forget-gone-fails", "Forget of a record that is gone is ErrRecordChanged", []string{"Forget"}},
	{"ignores-cancelled-context", "every method ignores its context's cancellation", []string{"CancelledContext"}},
	{"result-not-stored", "Complete drops the result", []string{"Result"}},
	{"result-aliased", "Complete keeps the caller's slice, not a copy", []string{"Result"}},
	{"refusal-without-result", "a refusal by a completion carries no result", []string{"Result"}},
	{"takeover-keeps-result", "an acquisition after the window keeps the old result", []string{"Result"}},
	{"outbox-not-stored", "Complete drops the outbox", []string{"Outbox"}},
	{"takeover-keeps-outbox", "an acquisition after the window keeps the old outbox", []string{"Outbox"}},
	{"mark-sent-unconditional", "MarkSent removes the outbox of whatever record is there", []string{"Outbox"}},
	{"mark-sent-drops-result", "MarkSent removes the result with the outbox", []string{"Outbox"}},
	{"mark-sent-without-fence", "MarkSent's condition is owner and COMPLETED, not the fence", []string{"Outbox"}},

	// TestTransactions' rules.
	{"empty-always", "a transaction is Empty whatever was added (the lock would complete without the writes)", []string{"EmptyUntilAdded"}},
	{"effect-at-add", "a write is applied when added, outside the transaction", []string{"EffectIffCompletion", "UserConditionFails"}},
	{"rollback-keeps-writes", "Rollback applies the writes it was to discard", []string{"EffectIffCompletion"}},
	{"commit-keeps-lock-expiry", "Commit leaves the lock's expiry in the completed record", []string{"EffectIffCompletion"}},
	{"commit-ignores-lost-lock", "a Commit whose record is no longer the lease's lock applies the writes, and answers ErrLockLost", []string{"LostLockCommitsNothing"}},
	{"commit-without-fence", "Commit's record condition is owner and PROCESSING, not the fence", []string{"LostLockCommitsNothing"}},
	{"commit-repeat-applies-again", "a repeat of an applied Commit applies the writes again", []string{"CommitRepeatRecognised"}},
	{"commit-repeat-lost", "a repeat of an applied Commit is ErrLockLost", []string{"CommitRepeatRecognised"}},
	{"effect-error-completes", "a transaction refused by a write's condition still completes the record", []string{"UserConditionFails"}},
	{"commit-drops-result", "Commit stores no result", []string{"ResultAndWindow"}},
	{"commit-window-rounded-up", "Commit keeps the window's end rounded up to the second", []string{"ResultAndWindow"}},
	{"sealed-takes-writes", "a write after Seal (the work returned) is taken with a nil error and never committed", []string{"SealedTakesNothing"}},
	{"commit-drops-outbox", "Commit stores no outbox", []string{"OutboxWithCommit"}},
	{"refused-commit-keeps-outbox", "a Commit refused by a write's condition stores its outbox on the lock", []string{"OutboxWithCommit"}},
}

// TestMutantChild runs the suite on the mutant mutantEnv names; it is the
// child process of TestMutantsFailTheirRules and skips otherwise.
func TestMutantChild(t *testing.T) {
	name, ok := os.LookupEnv(mutantEnv)
	if !ok {
		t.Skip("the child process of TestMutantsFailTheirRules")
	}
	if name != noMutant && !slices.ContainsFunc(mutants, func(m mutation) bool {
		return m.name == name
	}) {
		t.Fatalf("no mutant %q", name)
	}
	TestStore(t, func(t *testing.T) store.Store { return newMutant(name) })
	TestTransactions(t, func(t *testing.T) (store.Transactor, Effects) {
		m := newMutant(name)
		return m, memEffects{m}
	})
}

var failLine = regexp.MustCompile(`(?m)^\s*--- FAIL: TestMutantChild/(\S+) \(`)

func TestMutantsFailTheirRules(t *testing.T) {
	// Every rule is shown to bite by some mutant.
	all := slices.Concat(rules, txRules)
	for _, r := range all {
		if !slices.ContainsFunc(mutants, func(m mutation) bool {
			return slices.Contains(m.rules, r.name)
		}) {
			t.Errorf("no mutant breaks rule %s", r.name)
		}
	}
	for _, m := range mutants {
		for _, name := range m.rules {
			if !slices.ContainsFunc(all, func(r rule) bool { return r.name == name }) {
				t.Errorf("mutant %s names rule %q, which neither TestStore nor TestTransactions has", m.name, name)
			}
		}
	}

	run := func(t *testing.T, name string) (failed []string, out string, err error) {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestMutantChild$", "-test.v", "-test.count=1", "-test.timeout=2m")
		cmd.Env = append(os.Environ(), mutantEnv+"="+name)
		b, err := cmd.CombinedOutput()
		for _, m := range failLine.FindAllStringSubmatch(string(b), -1) {
			failed = append(failed, m[1])
		}
		sort.Strings(failed)
		return failed, string(b), err
	}

	t.Run(noMutant, func(t *testing.T) {
		t.Parallel()
		failed, out, err := run(t, noMutant)
		if err != nil || len(failed) > 0 || !strings.Contains(out, "--- PASS: TestMutantChild ") {
			t.Fatalf("the unmutated store failed the suite in the child process (%v; failing rules %v): the harness is broken\n%s", err, failed, out)
		}
	})
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			failed, out, err := run(t, m.name)
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("mutant %s (%s): the child process did not fail (%v); the suite let the bug through\n%s", m.name, m.bug, err, out)
			}
			for _, want := range m.rules {
				if !slices.Contains(failed, want) {
					t.Errorf("mutant %s (%s): rule %s did not fail (failing: %v)\n%s", m.name, m.bug, want, failed, out)
				}
			}
			t.Logf("mutant %s fails %v", m.name, failed)
		})
	}
}

// mutant is the memory store with one bug, named by name. Most bugs are
// made by reading or rewriting the record around the store's own call (Put
// writes a record as it is); the store's clock is never moved, so its TTL
// deletes nothing the suite writes.
type mutant struct {
	*memstore.Store
	name string

	mu sync.Mutex
	// firstNow is, per id, the Now of the Acquire that first created its
	// record (fence-restarts-after-delete).
	firstNow map[string]time.Time
	// seen is, per id, the first record Read returned (read-stale).
	seen map[string]store.Record
	// aliased is, per id, the caller's own slice that Complete kept as the
	// result (result-aliased).
	aliased map[string][]byte
	// outside are the writes a transactional bug applied outside a
	// transaction (effect-at-add, rollback-keeps-writes...), counted with
	// the committed ones.
	outside []any
}

func newMutant(name string) *mutant {
	return &mutant{Store: memstore.New(), name: name, firstNow: map[string]time.Time{}, seen: map[string]store.Record{}, aliased: map[string][]byte{}}
}

// raw is the record under id as the store holds it, unaffected by the
// caller's context.
func (m *mutant) raw(id string) (store.Record, bool) {
	rec, ok := m.Store.Records()[id]
	return rec, ok
}

// update rewrites the record under id with change.
func (m *mutant) update(id string, change func(*store.Record)) {
	rec, _ := m.raw(id)
	change(&rec)
	m.Put(rec)
}

// remove deletes the record under id, through the one delete the store
// has: Forget of a completion.
func (m *mutant) remove(id string) {
	rec, _ := m.raw(id)
	rec.Status, rec.ExpiresAt = store.StatusCompleted, time.Now().Add(24*time.Hour)
	m.Put(rec)
	if err := m.Store.Forget(context.Background(), rec); err != nil {
		panic(err)
	}
}

// putAliased keeps result itself in the record, as a store that does not
// copy what it is given would.
func (m *mutant) putAliased(id string, result []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.aliased[id] = result
}

// withAliased is rec with the caller's own slice as its result, where
// result-aliased kept one for a completion that is still there.
func (m *mutant) withAliased(rec store.Record) store.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	if a, ok := m.aliased[rec.ID]; ok && rec.Status == store.StatusCompleted && rec.Result != nil {
		rec.Result = a
	}
	return rec
}

// ttl rounds up to the second, as the stores write their TTL.
func ttl(t time.Time) time.Time {
	if s := time.Unix(t.Unix(), 0); s.Before(t) {
		return s.Add(time.Second)
	}
	return time.Unix(t.Unix(), 0)
}

func (m *mutant) ctx(ctx context.Context) context.Context {
	if m.name == "ignores-cancelled-context" {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

// cancelled is what every method answers first, as the store does, so that
// a mutation breaks only its own rule, not the cancelled context's.
func (m *mutant) cancelled(ctx context.Context) error {
	return m.ctx(ctx).Err()
}

func lockLost(op string) error { return fmt.Errorf("mutant %s: %w", op, store.ErrLockLost) }

func (m *mutant) Acquire(ctx context.Context, req store.AcquireRequest) (store.Lease, error) {
	if err := m.cancelled(ctx); err != nil {
		return store.Lease{}, err
	}
	old, exists := m.raw(req.ID)
	lock := exists && old.Status == store.StatusProcessing
	own := lock && old.Owner == req.Owner
	switch m.name {
	case "acquire-ignores-live-locks":
		if lock && !own && old.Live(req.Now) {
			m.update(req.ID, func(r *store.Record) { r.LockExpiresAt = req.Now.Add(-time.Millisecond) })
		}
	case "acquire-takes-over-at-expiry":
		if lock && !own && old.LockExpiresAt.Equal(req.Now) {
			m.update(req.ID, func(r *store.Record) { r.LockExpiresAt = req.Now.Add(-time.Millisecond) })
		}
	case "acquire-never-takes-over":
		if lock && !own {
			return store.Lease{}, &store.HeldError{Record: old}
		}
	case "acquire-without-own-recognition":
		if own && old.Live(req.Now) {
			return store.Lease{}, &store.HeldError{Record: old}
		}
	case "own-retry-moves-fence":
		if own && old.Live(req.Now) {
			m.update(req.ID, func(r *store.Record) { r.LockExpiresAt = req.Now.Add(-time.Millisecond) })
		}
	case "window-never-ends":
		if exists && old.Status == store.StatusCompleted {
			return store.Lease{}, &store.HeldError{Record: old}
		}
	case "window-ends-a-second-early":
		if exists && old.Status == store.StatusCompleted && old.ExpiresAt.Unix() == req.Now.Unix() {
			m.update(req.ID, func(r *store.Record) { r.ExpiresAt = r.ExpiresAt.Add(-time.Second) })
		}
	case "non-atomic-acquire":
		return m.acquireNonAtomic(ctx, req)
	case "fence-restarts-after-delete":
		if !exists {
			m.mu.Lock()
			if first, ok := m.firstNow[req.ID]; ok {
				req.Now = first // the seed of the record's first life
			} else {
				m.firstNow[req.ID] = req.Now
			}
			m.mu.Unlock()
		}
	}
	lease, err := m.Store.Acquire(m.ctx(ctx), req)
	var held *store.HeldError
	if errors.As(err, &held) {
		switch m.name {
		case "held-error-without-record":
			return lease, &store.HeldError{Record: store.Record{ID: held.Record.ID, Status: held.Record.Status}}
		case "refusal-without-result":
			rec := held.Record
			rec.Result = nil
			return lease, &store.HeldError{Record: rec}
		case "held-error-not-typed":
			if held.Record.Status == store.StatusCompleted {
				return lease, fmt.Errorf("mutant: %q: %w", req.ID, store.ErrDuplicate)
			}
			return lease, fmt.Errorf("mutant: %q: %w", req.ID, store.ErrInProgress)
		}
	}
	if err != nil {
		return lease, err
	}
	switch m.name {
	case "fence-starts-at-one":
		if !exists {
			lease.Fence = 1
			m.update(req.ID, func(r *store.Record) { r.Fence = 1 })
		}
	case "fence-not-incremented":
		if exists && old.Fence != 0 && lease.Fence != old.Fence {
			lease.Fence = old.Fence
			m.update(req.ID, func(r *store.Record) { r.Fence = old.Fence })
		}
	case "lock-expiry-in-seconds":
		m.update(req.ID, func(r *store.Record) { r.LockExpiresAt = r.LockExpiresAt.Truncate(time.Second) })
	case "lock-ttl-without-retention":
		m.update(req.ID, func(r *store.Record) { r.ExpiresAt = ttl(req.LockUntil) })
	case "payload-not-stored":
		m.update(req.ID, func(r *store.Record) { r.PayloadHash = "" })
	case "takeover-keeps-payload":
		if exists && req.PayloadHash == "" {
			m.update(req.ID, func(r *store.Record) { r.PayloadHash = old.PayloadHash })
		}
	case "acquire-after-release-is-a-takeover":
		lease.TookOver = lease.TookOver || exists
	case "takeover-keeps-result":
		if exists && old.Result != nil {
			m.update(req.ID, func(r *store.Record) { r.Result = old.Result })
		}
	case "takeover-keeps-outbox":
		if exists && old.Outbox != nil {
			m.update(req.ID, func(r *store.Record) { r.Outbox = old.Outbox })
		}
	}
	return lease, nil
}

// MarkSent implements store.Store, with the mutant's bug.
func (m *mutant) MarkSent(ctx context.Context, rec store.Record) error {
	if err := m.cancelled(ctx); err != nil {
		return err
	}
	switch m.name {
	case "mark-sent-unconditional":
		m.update(rec.ID, func(r *store.Record) { r.Outbox = nil })
		return nil
	case "mark-sent-without-fence":
		if now, ok := m.raw(rec.ID); ok && now.Status == store.StatusCompleted && now.Owner == rec.Owner {
			m.update(rec.ID, func(r *store.Record) { r.Outbox = nil })
			return nil
		}
	case "mark-sent-drops-result":
		if err := m.Store.MarkSent(m.ctx(ctx), rec); err != nil {
			return err
		}
		m.update(rec.ID, func(r *store.Record) { r.Result = nil })
		return nil
	}
	return m.Store.MarkSent(m.ctx(ctx), rec)
}

// acquireNonAtomic checks the record, then writes the lock without a
// condition: racing callers all pass the check before any writes.
func (m *mutant) acquireNonAtomic(ctx context.Context, req store.AcquireRequest) (store.Lease, error) {
	old, exists := m.raw(req.ID)
	if exists && old.Blocks(req.Now) {
		return m.Store.Acquire(ctx, req) // refused (or its own), as the store answers
	}
	// The gap between the check and the write that a conditional write
	// closes, widened so that the racers all fall into it.
	time.Sleep(20 * time.Millisecond)
	// The lock the store would write on the record as it was checked,
	// written over whatever is there now.
	scratch := memstore.New()
	if exists {
		scratch.Put(old)
	}
	lease, err := scratch.Acquire(ctx, req)
	if err == nil {
		m.Put(scratch.Records()[req.ID])
	}
	return lease, err
}

func (m *mutant) Renew(ctx context.Context, lease store.Lease, lockUntil time.Time) (store.Lease, error) {
	if err := m.cancelled(ctx); err != nil {
		return lease, err
	}
	rec, exists := m.raw(lease.ID)
	ownLock := exists && rec.Owner == lease.Owner && rec.Status == store.StatusProcessing
	switch m.name {
	case "renew-without-owner-check":
		if exists && rec.Status == store.StatusProcessing && rec.Owner != lease.Owner {
			m.update(lease.ID, func(r *store.Record) { r.LockExpiresAt = lockUntil.Truncate(time.Millisecond) })
			lease.LockExpiresAt = lockUntil
			return lease, nil
		}
	case "renew-any-status":
		if exists && rec.Owner == lease.Owner && rec.Status != store.StatusProcessing {
			m.update(lease.ID, func(r *store.Record) {
				r.LockExpiresAt = lockUntil.Truncate(time.Millisecond)
				r.ExpiresAt = ttl(lockUntil.Add(store.FenceRetention))
			})
			lease.LockExpiresAt = lockUntil
			return lease, nil
		}
	case "renew-does-not-extend":
		if ownLock {
			lease.LockExpiresAt = lockUntil
			return lease, nil
		}
	}
	return m.Store.Renew(m.ctx(ctx), lease, lockUntil)
}

func (m *mutant) Complete(ctx context.Context, lease store.Lease, c store.Completion) error {
	until, result := c.Until, c.Result
	if err := m.cancelled(ctx); err != nil {
		return err
	}
	rec, exists := m.raw(lease.ID)
	switch m.name {
	case "complete-without-owner-check":
		if exists && rec.Owner != lease.Owner {
			m.update(lease.ID, func(r *store.Record) {
				r.Status, r.ExpiresAt, r.LockExpiresAt = store.StatusCompleted, time.Unix(until.Unix(), 0), time.Time{}
			})
			return nil
		}
	case "complete-repeat-fails":
		if exists && rec.Owner == lease.Owner && rec.Status == store.StatusCompleted {
			return lockLost("complete")
		}
	}
	stored := result
	if m.name == "result-not-stored" {
		stored = nil
	}
	if m.name == "outbox-not-stored" {
		c.Outbox = nil
	}
	c.Result = stored
	if err := m.Store.Complete(m.ctx(ctx), lease, c); err != nil {
		return err
	}
	if m.name == "result-aliased" {
		m.putAliased(lease.ID, result)
	}
	if m.name == "complete-rounds-window-up" {
		m.update(lease.ID, func(r *store.Record) { r.ExpiresAt = ttl(until) })
	}
	return nil
}

func (m *mutant) Release(ctx context.Context, lease store.Lease, now time.Time) error {
	if err := m.cancelled(ctx); err != nil {
		return err
	}
	rec, exists := m.raw(lease.ID)
	release := func(r *store.Record) {
		r.Status, r.LockExpiresAt, r.ExpiresAt = store.StatusReleased, time.UnixMilli(0), ttl(now.Add(store.FenceRetention))
	}
	switch m.name {
	case "release-without-owner-check":
		if exists && rec.Status == store.StatusProcessing && rec.Owner != lease.Owner {
			m.update(lease.ID, release)
			return nil
		}
	case "release-any-status":
		if exists && rec.Status == store.StatusCompleted && rec.Owner == lease.Owner {
			m.update(lease.ID, release)
			return nil
		}
	case "release-deletes":
		if exists && rec.Status == store.StatusProcessing && rec.Owner == lease.Owner {
			m.remove(lease.ID)
			return nil
		}
	case "release-repeat-fails":
		if exists && rec.Status == store.StatusReleased && rec.Owner == lease.Owner {
			return lockLost("release")
		}
	case "release-gone-fails":
		if !exists {
			return lockLost("release")
		}
	case "release-needs-fence":
		if exists && rec.Status == store.StatusProcessing && lease.Fence != rec.Fence {
			return lockLost("release")
		}
	case "release-needs-lock-expiry":
		if exists && rec.Status == store.StatusProcessing && !lease.LockExpiresAt.Truncate(time.Millisecond).Equal(rec.LockExpiresAt) {
			return lockLost("release")
		}
	}
	return m.Store.Release(m.ctx(ctx), lease, now)
}

func (m *mutant) Read(ctx context.Context, id string) (store.Record, error) {
	if err := m.cancelled(ctx); err != nil {
		return store.Record{}, err
	}
	switch m.name {
	case "read-missing-is-empty":
		if _, exists := m.raw(id); !exists {
			return store.Record{}, nil
		}
	case "read-stale":
		m.mu.Lock()
		rec, ok := m.seen[id]
		m.mu.Unlock()
		if ok {
			return rec, nil
		}
	}
	rec, err := m.Store.Read(m.ctx(ctx), id)
	if err == nil && m.name == "result-aliased" {
		rec = m.withAliased(rec)
	}
	if err == nil && m.name == "read-stale" {
		m.mu.Lock()
		m.seen[id] = rec
		m.mu.Unlock()
	}
	return rec, err
}

func (m *mutant) Forget(ctx context.Context, rec store.Record) error {
	if err := m.cancelled(ctx); err != nil {
		return err
	}
	_, exists := m.raw(rec.ID)
	switch m.name {
	case "forget-unconditional":
		if exists {
			m.remove(rec.ID)
			return nil
		}
	case "forget-gone-fails":
		if !exists {
			return fmt.Errorf("mutant: forget %q: %w", rec.ID, store.ErrRecordChanged)
		}
	}
	return m.Store.Forget(m.ctx(ctx), rec)
}

func (m *mutant) Locks(ctx context.Context, prefix string, progress func(scanned, found int)) ([]store.Record, error) {
	if err := m.cancelled(ctx); err != nil {
		return nil, err
	}
	switch m.name {
	case "locks-lists-every-record", "locks-prefix-unbounded":
		var locks []store.Record
		for id, rec := range m.Store.Records() {
			under := strings.HasPrefix(id, prefix+"#")
			if m.name == "locks-prefix-unbounded" {
				under = strings.HasPrefix(id, prefix) && rec.Status == store.StatusProcessing
			}
			if under {
				locks = append(locks, rec)
			}
		}
		slices.SortFunc(locks, func(a, b store.Record) int { return a.LockExpiresAt.Compare(b.LockExpiresAt) })
		if progress != nil {
			progress(len(locks), len(locks))
		}
		return locks, nil
	case "locks-latest-first":
		locks, err := m.Store.Locks(m.ctx(ctx), prefix, progress)
		slices.Reverse(locks)
		return locks, err
	}
	return m.Store.Locks(m.ctx(ctx), prefix, progress)
}

// committed is the store's Committed, with the writes a bug applied
// outside a transaction.
func (m *mutant) committed() map[string][]any {
	c := m.Store.Committed()
	m.mu.Lock()
	defer m.mu.Unlock()
	c["mutant: outside any transaction"] = append([]any(nil), m.outside...)
	return c
}

// applyOutside applies writes as a store would outside a transaction: the
// increments, not the conditions.
func (m *mutant) applyOutside(writes ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range writes {
		if _, cond := w.(memstore.FailingCondition); !cond {
			m.outside = append(m.outside, w)
		}
	}
}

// mutantTx is the memory store's transaction with the mutant's bug.
type mutantTx struct {
	*memstore.Tx
	m     *mutant
	lease store.Lease

	mu sync.Mutex
	// writes are every write added, in order.
	writes []any
	// applied: a Commit returned nil.
	applied bool
}

// Begin implements store.Transactor.
func (m *mutant) Begin(lease store.Lease) store.Tx {
	return &mutantTx{Tx: m.Store.Begin(lease).(*memstore.Tx), m: m, lease: lease}
}

func (t *mutantTx) added() []any {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.writes)
}

func (t *mutantTx) Add(write any) error {
	if t.m.name == "sealed-takes-writes" {
		// The bug: a write after the seal is taken, and dropped (memstore
		// commits what it had), with a nil error.
		if err := t.Tx.Add(write); errors.Is(err, store.ErrTxEnded) {
			return nil
		} else if err != nil {
			return err
		}
		t.mu.Lock()
		t.writes = append(t.writes, write)
		t.mu.Unlock()
		return nil
	}
	t.mu.Lock()
	t.writes = append(t.writes, write)
	t.mu.Unlock()
	if _, cond := write.(memstore.FailingCondition); !cond && t.m.name == "effect-at-add" {
		t.m.applyOutside(write)
		return nil
	}
	return t.Tx.Add(write)
}

func (t *mutantTx) Empty() bool {
	switch t.m.name {
	case "empty-always":
		return true
	case "effect-at-add":
		return len(t.added()) == 0
	}
	return t.Tx.Empty()
}

func (t *mutantTx) Commit(ctx context.Context, c store.Completion) error {
	if err := t.m.cancelled(ctx); err != nil {
		return err
	}
	until := c.Until
	rec, exists := t.m.raw(t.lease.ID)
	t.mu.Lock()
	repeat := t.applied
	t.mu.Unlock()
	switch t.m.name {
	case "commit-ignores-lost-lock":
		err := t.Tx.Commit(ctx, c)
		if errors.Is(err, store.ErrLockLost) {
			t.m.applyOutside(t.added()...)
		}
		return err
	case "commit-without-fence":
		if exists && rec.Status == store.StatusProcessing && rec.Owner == t.lease.Owner && rec.Fence != t.lease.Fence {
			// Committed as if the lease had the record's fence.
			lease := t.lease
			lease.Fence = rec.Fence
			other := t.m.Store.Begin(lease).(*memstore.Tx)
			for _, w := range t.added() {
				if err := other.Add(w); err != nil {
					return err
				}
			}
			return other.Commit(ctx, c)
		}
	case "commit-repeat-applies-again":
		if repeat {
			t.m.applyOutside(t.added()...)
		}
	case "commit-repeat-lost":
		if repeat {
			return lockLost("commit")
		}
	case "effect-error-completes":
		err := t.Tx.Commit(ctx, c)
		var refused *store.EffectError
		if errors.As(err, &refused) {
			if cerr := t.m.Store.Complete(ctx, t.lease, c); cerr != nil {
				return cerr
			}
		}
		return err
	case "commit-drops-result":
		c.Result = nil
	case "commit-drops-outbox":
		c.Outbox = nil
	case "refused-commit-keeps-outbox":
		err := t.Tx.Commit(ctx, c)
		var refused *store.EffectError
		if errors.As(err, &refused) {
			t.m.update(t.lease.ID, func(r *store.Record) { r.Outbox = c.Outbox })
		}
		return err
	}
	if err := t.Tx.Commit(ctx, c); err != nil {
		return err
	}
	t.mu.Lock()
	t.applied = true
	t.mu.Unlock()
	switch t.m.name {
	case "commit-keeps-lock-expiry":
		t.m.update(t.lease.ID, func(r *store.Record) { r.LockExpiresAt = t.lease.LockExpiresAt.Truncate(time.Millisecond) })
	case "commit-window-rounded-up":
		t.m.update(t.lease.ID, func(r *store.Record) { r.ExpiresAt = ttl(until) })
	}
	return nil
}

func (t *mutantTx) Rollback(ctx context.Context) error {
	if t.m.name == "rollback-keeps-writes" {
		t.m.applyOutside(t.added()...)
	}
	return t.Tx.Rollback(ctx)
}

// increment is the memory store's write of an Effects counter: one
// increment of the named counter once committed.
type increment struct{ name string }

// memEffects is the mutants' Effects: ExampleTestTransactions' counters
// on memstore, for a transaction that wraps a memstore.Tx (a mutantTx:
// Add is memstore's, or the mutant's) and for the writes a bug applied
// outside a transaction.
type memEffects struct{ m *mutant }

func (e memEffects) Add(_ context.Context, tx store.Tx, name string, refused bool) error {
	adder, ok := tx.(interface{ Add(write any) error })
	if !ok {
		return fmt.Errorf("transaction %T is no memstore.Tx", tx)
	}
	if refused {
		return adder.Add(memstore.FailingCondition{Err: errors.New("condition of " + name + " refused")})
	}
	return adder.Add(increment{name})
}

func (e memEffects) Count(_ context.Context, name string) (int, error) {
	n := 0
	for _, writes := range e.m.committed() {
		for _, w := range writes {
			if w == (increment{name}) {
				n++
			}
		}
	}
	return n, nil
}
