package lru

import (
	"strconv"
	"sync"
	"testing"
)

func TestEvictsTheLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	c := New[string, int](2)
	c.Add("a", 1)
	c.Add("b", 2)
	c.Get("a") // b is now the least recently used
	c.Add("c", 3)
	if _, ok := c.Get("b"); ok {
		t.Error("b survived; it was the least recently used")
	}
	for k, want := range map[string]int{"a": 1, "c": 3} {
		if v, ok := c.Get(k); !ok || v != want {
			t.Errorf("%s = %d, %v; want %d", k, v, ok, want)
		}
	}
	c.Add("a", 10)
	if v, _ := c.Get("a"); v != 10 || c.Len() != 2 {
		t.Errorf("update: a = %d with %d entries, want 10 with 2", v, c.Len())
	}
	c.Remove("a")
	if _, ok := c.Get("a"); ok || c.Len() != 1 {
		t.Error("a not removed")
	}
}

func TestBoundedUnderConcurrentUse(t *testing.T) {
	t.Parallel()
	c := New[string, int](100)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				k := strconv.Itoa(g*1000 + i)
				c.Add(k, i)
				c.Get(k)
			}
		})
	}
	wg.Wait()
	if c.Len() != 100 {
		t.Errorf("%d entries, want the size, 100", c.Len())
	}
}
