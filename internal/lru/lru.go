// Package lru is a fixed-size least-recently-used cache, safe for concurrent
// use: a warm Lambda execution environment remembers the keys it has seen
// completed without its memory growing with the traffic.
package lru

import (
	"container/list"
	"sync"
)

// Cache holds at most its size entries; adding one more evicts the least
// recently used.
type Cache[K comparable, V any] struct {
	mu    sync.Mutex
	size  int
	order *list.List // front: most recently used
	items map[K]*list.Element
}

type entry[K comparable, V any] struct {
	key   K
	value V
}

// New returns a cache of size entries; size must be positive.
func New[K comparable, V any](size int) *Cache[K, V] {
	return &Cache[K, V]{size: max(size, 1), order: list.New(), items: make(map[K]*list.Element, size)}
}

// Get returns the key's value and marks it used.
func (c *Cache[K, V]) Get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[key]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*entry[K, V]).value, true
}

// Add sets the key's value, evicting the least recently used entry when the
// cache is full.
func (c *Cache[K, V]) Add(key K, value V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		e.Value.(*entry[K, V]).value = value
		c.order.MoveToFront(e)
		return
	}
	c.items[key] = c.order.PushFront(&entry[K, V]{key, value})
	if c.order.Len() > c.size {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*entry[K, V]).key)
	}
}

// Remove forgets the key.
func (c *Cache[K, V]) Remove(key K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.order.Remove(e)
		delete(c.items, key)
	}
}

// Len is the number of entries.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
