// Package testclock is the module's one settable clock, for tests of
// time-based behaviour (lock expiry, dedupe windows, lock renewal, replay
// delays, the CLI's waits), so that no test sleeps to let time pass. The
// in-memory store keeps its clock in one. Standard library only: it may
// be linked into a user's test binary through memstore.
package testclock

import (
	"context"
	"sync"
	"time"
)

// Clock is safe for the concurrent holders of one test.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	// changed is closed and replaced whenever the set of waiters changes,
	// so WaitForWaiters can block without polling.
	changed chan struct{}
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

// New returns a clock showing start.
func New(start time.Time) *Clock { return &Clock{now: start, changed: make(chan struct{})} }

// Now has the signature of time.Now, to be injected in its place.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and fires every After whose time has
// come.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(c.now.Add(d))
}

// Set puts the clock at t, forward or back (a test of clock skew), and
// fires every After whose time has come.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setLocked(t)
}

// Sleep has the signature of clock.Sleep: it moves the clock on by d at once
// instead of waiting, for code that paces itself with an injected sleep and
// reads this clock's Now. An ended ctx is returned, as the real sleep does,
// with the clock left where it was.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.Advance(max(d, 0))
	return nil
}

func (c *Clock) setLocked(t time.Time) {
	c.now = t
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.now
	}
	c.waiters = kept
	c.notify()
}

// After has the signature of time.After: the channel receives once Advance
// has moved the clock d past now.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, waiter{at: c.now.Add(d), ch: ch})
	c.notify()
	return ch
}

// WaitForWaiters blocks until at least n After channels are waiting to fire,
// or ctx ends: a test advances the clock only once the code under test is
// waiting on it.
func (c *Clock) WaitForWaiters(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		have, changed := len(c.waiters), c.changed
		c.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

func (c *Clock) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}
