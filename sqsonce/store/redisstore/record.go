package redisstore

import (
	"fmt"
	"strconv"
	"time"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// parseRecord reads a record's hash, refusing one the protocol did not
// write (a field missing or not a number) with a *store.RecordError, and
// the record as far as it could be read, so that an operator still sees
// it.
func parseRecord(id string, h map[string]string) (store.Record, error) {
	rec := store.Record{
		ID:          id,
		Status:      store.Status(h[fieldStatus]),
		Owner:       h[fieldOwner],
		PayloadHash: h[fieldPayloadHash],
	}
	if v, ok := h[fieldResult]; ok {
		// Present and empty is an empty result, not none: []byte("") is
		// not nil.
		rec.Result = []byte(v)
	}
	if v, ok := h[fieldOutbox]; ok {
		// As the result. A record written before outboxes has no field,
		// and reads as none.
		rec.Outbox = []byte(v)
	}
	bad := func(format string, args ...any) (store.Record, error) {
		return rec, &store.RecordError{ID: id, Problem: fmt.Sprintf(format, args...)}
	}
	fence, err := strconv.ParseInt(h[fieldFence], 10, 64)
	if err != nil {
		return bad("the hash has no numeric %s (%q)", fieldFence, h[fieldFence])
	}
	rec.Fence = fence
	expires, err := strconv.ParseInt(h[fieldExpiresAt], 10, 64)
	if err != nil {
		return bad("the hash has no numeric %s (%q)", fieldExpiresAt, h[fieldExpiresAt])
	}
	rec.ExpiresAt = time.Unix(expires, 0)
	if _, ok := h[fieldOwner]; !ok {
		return bad("the hash has no %s", fieldOwner)
	}
	switch rec.Status {
	case store.StatusProcessing:
		lock, err := strconv.ParseInt(h[fieldLockExpiresAt], 10, 64)
		if err != nil {
			return bad("a %s record without a numeric %s (%q)", rec.Status, fieldLockExpiresAt, h[fieldLockExpiresAt])
		}
		rec.LockExpiresAt = time.UnixMilli(lock)
	case store.StatusCompleted, store.StatusReleased:
	default:
		return bad("%s is %q, not %s, %s or %s", fieldStatus, rec.Status, store.StatusProcessing, store.StatusCompleted, store.StatusReleased)
	}
	return rec, nil
}
