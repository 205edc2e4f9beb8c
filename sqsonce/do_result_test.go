package sqsonce

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// order is what the API handler of the DoResult tests answers.
type order struct {
	ID    string  `json:"id"`
	Total float64 `json:"total"`
}

// doProcessor is a Processor for Do on e's store (counted) and clock, with
// configure applied; sleep is the wait's (nil: none).
func (e *lockEnv) doProcessor(t *testing.T, st store.Store, sleep func(context.Context, time.Duration) error, configure ...func(*Config)) *Processor {
	t.Helper()
	cfg := e.lockConfig(st)
	cfg.Test.Rand = func() float64 { return 0.5 }
	for _, c := range configure {
		c(&cfg)
	}
	if sleep == nil {
		sleep = lockNoSleep
	}
	p, err := newDo(cfg, deps{sleep: sleep})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A repeated call gets the first call's result, nil error, its function
// not run, from the refusal itself: one store call, and none warm.
func TestDoResultReturnsTheFirstAnswer(t *testing.T) {
	lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
		ctx := context.Background()
		p := e.doProcessor(t, e.store, nil, func(c *Config) { c.LocalCache = 10 })
		runs := 0
		place := func(context.Context) (order, error) { runs++; return order{ID: "o-1", Total: 12.5}, nil }

		first, err := DoResult(ctx, p, "req-1", place)
		if err != nil || first != (order{ID: "o-1", Total: 12.5}) || runs != 1 {
			t.Fatalf("first call: %+v, %v, runs %d; want the order, nil, 1 run", first, err, runs)
		}
		if got := e.calls.Load(); got != 2 {
			t.Errorf("first call made %d store calls, want 2 (acquire, complete with the result)", got)
		}
		rec, _ := e.read(t, lockID("req-1"))
		if string(rec.Result) != `{"id":"o-1","total":12.5}` {
			t.Errorf("stored result %q", rec.Result)
		}

		// Another process (no cache): the refusal carries the result.
		e.calls.Store(0)
		other := e.doProcessor(t, e.newStore(), nil)
		again, err := DoResult(ctx, other, "req-1", place)
		if err != nil || again != first || runs != 1 {
			t.Errorf("repeated call: %+v, %v, runs %d; want the first answer, nil, fn not run", again, err, runs)
		}
		if got := e.calls.Load(); got != 1 {
			t.Errorf("repeated call made %d store calls, want 1 (the refused acquire)", got)
		}

		// The same process again: its cache answers with the result.
		e.calls.Store(0)
		cached, err := DoResult(ctx, p, "req-1", place)
		if err != nil || cached != first || runs != 1 || e.calls.Load() != 0 {
			t.Errorf("warm repeated call: %+v, %v, runs %d, %d store calls; want the first answer from the cache, no call", cached, err, runs, e.calls.Load())
		}
	})
}

// The documented way to tell a replay from a first run.
func TestDoResultReplayIsToldByTheFunctionNotRunning(t *testing.T) {
	e := newLockMemoryEnv(t)
	p := e.doProcessor(t, e.store, nil)
	call := func() (replayed bool) {
		ran := false
		_, err := DoResult(context.Background(), p, "req-2", func(context.Context) (int, error) { ran = true; return 7, nil })
		if err != nil {
			t.Fatal(err)
		}
		return !ran
	}
	if call() {
		t.Error("first call seen as a replay")
	}
	if !call() {
		t.Error("second call not seen as a replay")
	}
}

// A result too large to store, or not encodable, still completes the key
// (the side effect happened): the first caller gets its value and a
// *ResultError, later callers ErrDuplicate, and fn never runs twice.
func TestDoResultTooLargeCompletesWithoutTheResult(t *testing.T) {
	lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
		ctx := context.Background()
		p := e.doProcessor(t, e.store, nil)
		big := strings.Repeat("x", store.MaxResultSize) // 2 more bytes of JSON quotes
		runs := 0
		v, err := DoResult(ctx, p, "big", func(context.Context) (string, error) { runs++; return big, nil })
		var rerr *ResultError
		if !errors.As(err, &rerr) || rerr.Size != store.MaxResultSize+2 || v != big {
			t.Fatalf("too large: value of %d bytes, %v; want the value and a *ResultError of %d bytes", len(v), err, store.MaxResultSize+2)
		}
		rec, _ := e.read(t, lockID("big"))
		if rec.Status != store.StatusCompleted || rec.Result != nil {
			t.Errorf("record after a too large result: %s, result of %d bytes; want COMPLETED without a result", rec, len(rec.Result))
		}
		_, err = DoResult(ctx, p, "big", func(context.Context) (string, error) { runs++; return "", nil })
		if !errors.Is(err, ErrDuplicate) || runs != 1 {
			t.Errorf("call after a too large result: %v, runs %d; want ErrDuplicate, fn run once", err, runs)
		}

		_, err = DoResult(ctx, p, "chan", func(context.Context) (chan int, error) { return make(chan int), nil })
		if !errors.As(err, &rerr) || rerr.Err == nil {
			t.Errorf("unencodable result: %v, want a *ResultError carrying json's error", err)
		}
		if rec, _ := e.read(t, lockID("chan")); rec.Status != store.StatusCompleted {
			t.Errorf("record after an unencodable result: %s, want COMPLETED", rec)
		}
	})
}

// A stored result that no longer decodes (the type changed) is a duplicate
// all the same: fn does not run again.
func TestDoResultOfAnotherTypeIsADuplicate(t *testing.T) {
	e := newLockMemoryEnv(t)
	p := e.doProcessor(t, e.store, nil)
	ctx := context.Background()
	if _, err := DoResult(ctx, p, "k", func(context.Context) (string, error) { return "text", nil }); err != nil {
		t.Fatal(err)
	}
	ran := false
	_, err := DoResult(ctx, p, "k", func(context.Context) (int, error) { ran = true; return 1, nil })
	if !errors.Is(err, ErrDuplicate) || ran {
		t.Errorf("decoding into another type: %v, ran %v; want an error matching ErrDuplicate, fn not run", err, ran)
	}
	// Do's completion stores no result: DoResult then says ErrDuplicate.
	if err := p.Do(ctx, "plain", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := DoResult(ctx, p, "plain", func(context.Context) (int, error) { ran = true; return 1, nil }); !errors.Is(err, ErrDuplicate) || ran {
		t.Errorf("key completed by Do: %v, ran %v; want ErrDuplicate, fn not run", err, ran)
	}
}

// A failed function stores nothing and releases the key: the next call
// runs and its result is the one stored.
func TestDoResultFailureStoresNothing(t *testing.T) {
	e := newLockMemoryEnv(t)
	p := e.doProcessor(t, e.store, nil)
	ctx := context.Background()
	boom := errors.New("card declined")
	if _, err := DoResult(ctx, p, "k", func(context.Context) (int, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Fatalf("failing call: %v, want fn's error", err)
	}
	if v, err := DoResult(ctx, p, "k", func(context.Context) (int, error) { return 2, nil }); err != nil || v != 2 {
		t.Fatalf("retry: %v, %v; want 2, nil", v, err)
	}
	if v, err := DoResult(ctx, p, "k", func(context.Context) (int, error) { return 3, nil }); err != nil || v != 2 {
		t.Errorf("replay: %v, %v; want the stored 2", v, err)
	}
}

// waitBed is a holder that took a key directly on the store, and a waiter
// whose sleeps move the test's clock and, at the sleep numbered act, let
// the holder do what the test says.
type waitBed struct {
	e      *lockEnv
	holder store.Lease
	sleeps atomic.Int32
	reads  atomic.Int32
}

// readCounting counts Read calls only: the wait's cost.
type readCounting struct {
	store.Store
	reads *atomic.Int32
}

func (s readCounting) Read(ctx context.Context, id string) (store.Record, error) {
	s.reads.Add(1)
	return s.Store.Read(ctx, id)
}

func newWaitBed(t *testing.T, lock time.Duration) *waitBed {
	e := newLockMemoryEnv(t)
	b := &waitBed{e: e}
	b.holder = e.acquire(t, e.uncounted, "holder", "k", "", lock)
	return b
}

// waiter is a processor that waits up to wait; act runs at its sleep
// number n (1 first), after the clock moved.
func (b *waitBed) waiter(t *testing.T, wait time.Duration, n int32, act func(), configure ...func(*Config)) *Processor {
	sleep := func(ctx context.Context, d time.Duration) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		b.e.clock.Advance(d)
		if b.sleeps.Add(1) == n && act != nil {
			act()
		}
		return nil
	}
	configure = append(configure, func(c *Config) { c.WaitInProgress = wait })
	return b.e.doProcessor(t, readCounting{Store: b.e.uncounted, reads: &b.reads}, sleep, configure...)
}

func TestWaitInProgressReturnsTheHoldersResult(t *testing.T) {
	b := newWaitBed(t, time.Minute)
	var outcomes []Outcome
	p := b.waiter(t, 10*time.Second, 3, func() {
		if err := b.e.uncounted.Complete(context.Background(), b.holder, store.Completion{Until: b.e.clock.Now().Add(time.Hour), Result: []byte(`"holder's answer"`)}); err != nil {
			t.Error(err)
		}
	}, func(c *Config) {
		c.OnOutcome = func(_ context.Context, o Outcome) { outcomes = append(outcomes, o) }
	})
	ran := false
	v, err := DoResult(context.Background(), p, "k", func(context.Context) (string, error) { ran = true; return "mine", nil })
	if err != nil || v != "holder's answer" || ran {
		t.Fatalf("waiter: %q, %v, ran %v; want the holder's answer, nil, fn not run", v, err, ran)
	}
	if got := b.reads.Load(); got != 3 {
		t.Errorf("%d reads, want 3 (one per interval, the third finding the completion)", got)
	}
	if len(outcomes) != 1 || outcomes[0].Kind != KindDuplicate || outcomes[0].Waited <= 0 {
		t.Errorf("outcomes %+v; want one Duplicate that waited", outcomes)
	}
}

func TestWaitInProgressRunsWhenTheHolderReleases(t *testing.T) {
	b := newWaitBed(t, time.Minute)
	p := b.waiter(t, 10*time.Second, 2, func() {
		if err := b.e.uncounted.Release(context.Background(), b.holder, b.e.clock.Now()); err != nil {
			t.Error(err)
		}
	})
	v, err := DoResult(context.Background(), p, "k", func(context.Context) (string, error) { return "mine", nil })
	if err != nil || v != "mine" {
		t.Fatalf("waiter after a release: %q, %v; want its own run", v, err)
	}
	if rec, _ := b.e.read(t, lockID("k")); rec.Status != store.StatusCompleted || rec.Fence != b.holder.Fence+1 {
		t.Errorf("record %s; want COMPLETED by the waiter, fence %d", rec, b.holder.Fence+1)
	}
}

func TestWaitInProgressTakesOverADeadHolder(t *testing.T) {
	b := newWaitBed(t, 2*time.Second)
	p := b.waiter(t, 10*time.Second, 0, nil)
	ran := false
	if err := p.Do(context.Background(), "k", func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("waiter on an expiring lock: %v, ran %v; want it to take over and run", err, ran)
	}
	if elapsed := b.e.clock.Now().Sub(b.holder.LockExpiresAt); elapsed < 0 || elapsed > time.Second {
		t.Errorf("took over %v after the lock expired; want within one interval (1 s)", elapsed)
	}
}

// A holder that outlasts the wait: ErrInProgress once the wait is spent,
// with no more reads than the bound.
func TestWaitInProgressIsBounded(t *testing.T) {
	for _, wait := range []time.Duration{300 * time.Millisecond, 10 * time.Second, time.Minute} {
		b := newWaitBed(t, time.Hour)
		start := b.e.clock.Now()
		p := b.waiter(t, wait, 0, nil)
		err := p.Do(context.Background(), "k", func(context.Context) error { t.Error("fn ran under a live lock"); return nil })
		if !errors.Is(err, ErrInProgress) {
			t.Errorf("wait %v: %v, want ErrInProgress", wait, err)
		}
		if waited := b.e.clock.Now().Sub(start); waited != wait {
			t.Errorf("wait %v: waited %v", wait, waited)
		}
		if got, max := int(b.reads.Load()), waitReads(wait); got < 1 || got > max {
			t.Errorf("wait %v: %d reads, want 1 to %d", wait, got, max)
		}
	}
	if got := waitReads(10 * time.Second); got != 24 {
		t.Errorf("waitReads(10s) = %d; docs/library.md says 24", got)
	}
}

// The context bounds the wait too.
func TestWaitInProgressEndsWithTheContext(t *testing.T) {
	b := newWaitBed(t, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	p := b.waiter(t, time.Minute, 2, cancel)
	err := p.Do(ctx, "k", func(context.Context) error { return nil })
	if !errors.Is(err, ErrInProgress) || b.sleeps.Load() != 2 || b.reads.Load() != 1 {
		t.Errorf("cancelled wait: %v after %d sleeps, %d reads; want ErrInProgress, no read after the cancel", err, b.sleeps.Load(), b.reads.Load())
	}
}

func TestWaitIntervalGrowsWithJitter(t *testing.T) {
	prevMin := time.Duration(0)
	for attempt := range 8 {
		lo, hi := waitInterval(attempt, 0.999999), waitInterval(attempt, 0)
		if lo < hi/2 || lo > hi || hi > time.Second {
			t.Errorf("attempt %d: interval from %v to %v; want within [step/2, step], step at most 1 s", attempt, lo, hi)
		}
		if lo < prevMin {
			t.Errorf("attempt %d: shortest interval %v shrank from %v", attempt, lo, prevMin)
		}
		prevMin = lo
	}
}
