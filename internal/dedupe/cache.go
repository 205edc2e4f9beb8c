package dedupe

import (
	"time"

	"github.com/sqs-once/sqs-once/internal/lru"
)

// CompletedCache remembers, in this process, keys seen COMPLETED and until
// when, so that a warm Lambda execution environment answers a repeated
// duplicate without a table call. Its trade-off: a record deleted by hand (to
// let a key run again) is still a duplicate here until its window ends, in
// every warm environment that saw it.
type CompletedCache struct {
	entries *lru.Cache[string, completion]
}

type completion struct {
	until       time.Time
	payloadHash string
}

// NewCompletedCache returns a cache of at most size keys (least recently
// used evicted first).
func NewCompletedCache(size int) *CompletedCache {
	return &CompletedCache{entries: lru.New[string, completion](size)}
}

// held is the cached refusal of key at now: a *HeldError for a duplicate, a
// *PayloadMismatchError for another payload, nil when the cache cannot say.
func (c *CompletedCache) held(key, payloadHash string, now time.Time) error {
	if c == nil {
		return nil
	}
	done, ok := c.entries.Get(key)
	if !ok {
		return nil
	}
	if !now.Before(done.until) {
		c.entries.Remove(key)
		return nil
	}
	if payloadHash != "" && done.payloadHash != "" && done.payloadHash != payloadHash {
		return &PayloadMismatchError{Key: key, Status: StatusCompleted}
	}
	return &HeldError{Key: key, Status: StatusCompleted, Until: done.until, PayloadHash: done.payloadHash}
}

func (c *CompletedCache) add(key string, until time.Time, payloadHash string) {
	if c != nil {
		c.entries.Add(key, completion{until: until, payloadHash: payloadHash})
	}
}
