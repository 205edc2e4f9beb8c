package testclock

import (
	"context"
	"testing"
	"time"
)

func TestAfterFiresOnlyOnceAdvancedPastItsTime(t *testing.T) {
	t.Parallel()
	c := New(time.Unix(0, 0))
	ch := c.After(3 * time.Second)
	c.Advance(2 * time.Second)
	select {
	case <-ch:
		t.Fatal("fired 1 s early")
	default:
	}
	c.Advance(time.Second)
	select {
	case at := <-ch:
		if !at.Equal(time.Unix(3, 0)) {
			t.Errorf("fired with %v, want the clock's time 3 s", at)
		}
	default:
		t.Fatal("did not fire at its time")
	}
}

func TestWaitForWaitersSeesAWaiterRegisteredLater(t *testing.T) {
	t.Parallel()
	c := New(time.Unix(0, 0))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go c.After(time.Second)
	if err := c.WaitForWaiters(ctx, 1); err != nil {
		t.Fatalf("no waiter seen: %v", err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancelShort()
	if err := c.WaitForWaiters(short, 2); err == nil {
		t.Error("WaitForWaiters(2) returned with one waiter")
	}
}
