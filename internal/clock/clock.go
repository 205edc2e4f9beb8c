package clock

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx ends, and returns ctx's error if it ended
// first. A d of 0 or less returns at once (with ctx's error, if any). It has
// the signature the lock's and the CLI's injected sleeps take, so a test
// puts its own in its place.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
