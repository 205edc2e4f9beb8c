package replay

import (
	"testing"
	"time"
)

// HoldFor, the FIFO hold: what is left of the backoff since the record
// reached the DLQ, rounded up to whole seconds, never more than MaxDelay.
func TestHoldFor(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_767_225_600_000)
	tests := []struct {
		name  string
		sent  time.Time
		delay time.Duration
		want  time.Duration
	}{
		{"just arrived", now, 8 * time.Second, 8 * time.Second},
		{"part served, rounded up", now.Add(-2500 * time.Millisecond), 8 * time.Second, 6 * time.Second},
		{"exactly served", now.Add(-8 * time.Second), 8 * time.Second, 0},
		{"long served", now.Add(-time.Hour), 8 * time.Second, 0},
		{"no backoff", now, 0, 0},
		{"unknown arrival: send now", time.Time{}, 8 * time.Second, 0},
		{"arrival in the future: send now, never hold for ever", now.Add(time.Hour), 8 * time.Second, 0},
		{"capped at MaxDelay", now, time.Hour, MaxDelay},
	}
	for _, tt := range tests {
		if got := HoldFor(tt.sent, tt.delay, now); got != tt.want {
			t.Errorf("%s: HoldFor = %v, want %v", tt.name, got, tt.want)
		}
	}
}
