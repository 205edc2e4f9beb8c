// Package clock is how the module's code waits: Sleep, a pause that ends
// early with its context. What to wait is internal/jitter's; a test that
// lets time pass without waiting uses internal/testclock.
package clock
