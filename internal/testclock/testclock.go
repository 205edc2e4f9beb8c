// Package testclock is a settable clock for tests of time-based behaviour
// (lock expiry, dedupe windows), so that no test sleeps to let time pass.
package testclock

import (
	"sync"
	"time"
)

// Clock is safe for the concurrent holders of one test.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a clock showing start.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now has the signature of time.Now, to be injected in its place.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
