package sqsonce

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The lock's wait draws the intervals it always drew, to the nanosecond:
// 50 ms doubling to 1 s, the ceiling less ⌊r·ceiling/2⌋ (docs/library.md
// states the range; TestWaitInProgressIsBounded the reads it bounds).
func TestWaitIntervalValues(t *testing.T) {
	t.Parallel()
	steps := []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond,
		400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second, time.Second}
	rng := rand.New(rand.NewPCG(3, 4))
	for attempt, step := range steps {
		for i := range 1000 {
			r := rng.Float64()
			if i < 2 {
				r = float64(i) // both ends
			}
			if got, want := waitInterval(attempt, r), step-time.Duration(r*float64(step/2)); got != want {
				t.Fatalf("waitInterval(%d, %v) = %d ns, want %d ns", attempt, r, got, want)
			}
		}
	}
	if got := waitInterval(1000, 0); got != time.Second {
		t.Errorf("waitInterval(1000, 0) = %v, want the 1 s ceiling", got)
	}
}

// A completion write is retried after 50, 100 and 200 ms: completeAttempts
// writes in all.
func TestCompleteDelayValues(t *testing.T) {
	t.Parallel()
	want := []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}
	if len(want) != completeAttempts-1 {
		t.Fatalf("%d pauses pinned for %d attempts", len(want), completeAttempts)
	}
	for i, w := range want {
		if got := completeDelay(i + 1); got != w {
			t.Errorf("completeDelay(%d) = %v, want %v", i+1, got, w)
		}
	}
}
