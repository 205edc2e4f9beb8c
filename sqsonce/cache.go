package sqsonce

import (
	"time"

	"github.com/sqs-once/sqs-once/internal/lru"
	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// completedCache remembers, in this process, keys seen COMPLETED and until
// when, so that a warm Lambda execution environment answers a repeated
// duplicate without a table call. Its trade-off: a record deleted by hand (to
// let a key run again) is still a duplicate here until its window ends, in
// every warm environment that saw it.
type completedCache struct {
	entries *lru.Cache[string, completion]
}

type completion struct {
	until       time.Time
	payloadHash string
	result      []byte
}

// newCompletedCache returns a cache of at most size keys (least recently
// used evicted first).
func newCompletedCache(size int) *completedCache {
	return &completedCache{entries: lru.New[string, completion](size)}
}

// held is the cached refusal of key at now: a *HeldError for a duplicate
// (with its stored result), a *payloadMismatchError for another payload,
// nil when the cache cannot say.
func (c *completedCache) held(id, payloadHash string, now time.Time) ([]byte, error) {
	if c == nil {
		return nil, nil
	}
	done, ok := c.entries.Get(id)
	if !ok {
		return nil, nil
	}
	if !now.Before(done.until) {
		c.entries.Remove(id)
		return nil, nil
	}
	if payloadHash != "" && done.payloadHash != "" && done.payloadHash != payloadHash {
		return nil, &payloadMismatchError{ID: id, Status: store.StatusCompleted}
	}
	return done.result, &store.HeldError{Record: store.Record{ID: id, Status: store.StatusCompleted, ExpiresAt: done.until, PayloadHash: done.payloadHash, Result: done.result}}
}

// add remembers a completion, with its stored result (DoResult's): the
// cache's memory is its entries' results, at most Config.LocalCache of
// them.
func (c *completedCache) add(id string, until time.Time, payloadHash string, result []byte) {
	if c != nil {
		c.entries.Add(id, completion{until: until, payloadHash: payloadHash, result: result})
	}
}
