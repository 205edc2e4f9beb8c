package redisstore

import (
	"fmt"
	"strconv"
	"time"

	"github.com/sqs-once/sqs-once/sqsonce"
)

// parseRecord reads a record's hash, refusing one the protocol did not
// write (a field missing or not a number) with a *sqsonce.RecordError, and
// the record as far as it could be read, so that an operator still sees
// it.
func parseRecord(id string, h map[string]string) (sqsonce.Record, error) {
	rec := sqsonce.Record{
		ID:          id,
		Status:      sqsonce.Status(h[fieldStatus]),
		Owner:       h[fieldOwner],
		PayloadHash: h[fieldPayloadHash],
	}
	if v, ok := h[fieldResult]; ok {
		// Present and empty is an empty result, not none: []byte("") is
		// not nil.
		rec.Result = []byte(v)
	}
	bad := func(format string, args ...any) (sqsonce.Record, error) {
		return rec, &sqsonce.RecordError{ID: id, Problem: fmt.Sprintf(format, args...)}
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
	case sqsonce.StatusProcessing:
		lock, err := strconv.ParseInt(h[fieldLockExpiresAt], 10, 64)
		if err != nil {
			return bad("a %s record without a numeric %s (%q)", rec.Status, fieldLockExpiresAt, h[fieldLockExpiresAt])
		}
		rec.LockExpiresAt = time.UnixMilli(lock)
	case sqsonce.StatusCompleted, sqsonce.StatusReleased:
	default:
		return bad("%s is %q, not %s, %s or %s", fieldStatus, rec.Status, sqsonce.StatusProcessing, sqsonce.StatusCompleted, sqsonce.StatusReleased)
	}
	return rec, nil
}
