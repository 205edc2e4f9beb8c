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

func TestSetMovesEitherWayAndFiresWhatIsDue(t *testing.T) {
	t.Parallel()
	c := New(time.Unix(100, 0))
	ch := c.After(10 * time.Second)
	c.Set(time.Unix(50, 0))
	if got := c.Now(); !got.Equal(time.Unix(50, 0)) {
		t.Fatalf("Now after Set back = %v, want 50 s", got)
	}
	select {
	case <-ch:
		t.Fatal("fired when set back")
	default:
	}
	c.Set(time.Unix(110, 0))
	select {
	case at := <-ch:
		if !at.Equal(time.Unix(110, 0)) {
			t.Errorf("fired with %v, want the clock's time 110 s", at)
		}
	default:
		t.Fatal("did not fire once set past its time")
	}
}

func TestSleepAdvancesAtOnceUnlessTheContextEnded(t *testing.T) {
	t.Parallel()
	c := New(time.Unix(0, 0))
	ch := c.After(2 * time.Second)
	if err := c.Sleep(context.Background(), 2*time.Second); err != nil {
		t.Fatalf("Sleep: %v", err)
	}
	if got := c.Now(); !got.Equal(time.Unix(2, 0)) {
		t.Errorf("Now after Sleep(2s) = %v, want 2 s", got)
	}
	select {
	case <-ch:
	default:
		t.Error("a sleep past an After's time did not fire it")
	}
	if err := c.Sleep(context.Background(), -time.Second); err != nil || !c.Now().Equal(time.Unix(2, 0)) {
		t.Errorf("Sleep(-1s) = %v, clock at %v; want nil and the clock not moved back", err, c.Now())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, time.Hour); err == nil || !c.Now().Equal(time.Unix(2, 0)) {
		t.Errorf("Sleep on an ended context = %v, clock at %v; want its error and the clock where it was", err, c.Now())
	}
}
