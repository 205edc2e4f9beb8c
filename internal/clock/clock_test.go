package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleepWaitsItsDuration(t *testing.T) {
	t.Parallel()
	start := time.Now()
	if err := Sleep(context.Background(), 20*time.Millisecond); err != nil {
		t.Fatalf("Sleep: %v", err)
	}
	if slept := time.Since(start); slept < 20*time.Millisecond {
		t.Errorf("slept %v, want at least 20ms", slept)
	}
}

func TestSleepEndsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	start := time.Now()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep = %v, want context.Canceled", err)
	}
	if slept := time.Since(start); slept > 10*time.Second {
		t.Errorf("returned after %v: the cancel did not end it", slept)
	}
}

func TestSleepOfNothingReportsAnEndedContext(t *testing.T) {
	t.Parallel()
	if err := Sleep(context.Background(), 0); err != nil {
		t.Errorf("Sleep(0) = %v, want nil", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, d := range []time.Duration{-time.Second, 0, time.Hour} {
		if err := Sleep(ctx, d); !errors.Is(err, context.Canceled) {
			t.Errorf("Sleep(%v) on an ended context = %v, want context.Canceled", d, err)
		}
	}
}
