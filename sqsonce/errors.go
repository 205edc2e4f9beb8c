package sqsonce

import (
	"errors"
	"fmt"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// Errors a caller tests with errors.Is. The first five are the store
// package's own values (ErrDuplicate is store.ErrDuplicate), so an error
// from a store matches them as it matches the store's.
var (
	// ErrDuplicate: the key already completed within its window; the
	// function did not run.
	ErrDuplicate = store.ErrDuplicate
	// ErrInProgress: another holder has the key's live lock; the function
	// did not run.
	ErrInProgress = store.ErrInProgress
	// ErrLockLost: the lock was taken over or could not be renewed before
	// it expired, so its holder must stop and must not write its outcome.
	// It is also the cause of a handler's context when a renewal finds the
	// lock lost: stop, and return an error.
	ErrLockLost = store.ErrLockLost
	// ErrUnavailable: the store failed, throttled or did not answer; the
	// function did not run (or, for a completion, its outcome is unknown).
	ErrUnavailable = store.ErrUnavailable
	// ErrMisconfigured: the table is missing, denied, of another schema, or
	// holds a record the protocol did not write; no retry helps until
	// someone fixes the deployment. The function did not run.
	ErrMisconfigured = store.ErrMisconfigured
)

// Errors of sqsonce's own.
var (
	// ErrPayloadMismatch: the key is held (completed or in progress) for
	// another payload: a conflict, not a duplicate.
	ErrPayloadMismatch = errors.New("sqsonce: same key, different payload")
	// ErrNoKey: Do's key is empty, longer than 1024 bytes or not valid
	// UTF-8, or a record lacks the key its Config.Key names (the record is
	// retried, never run).
	ErrNoKey = errors.New("sqsonce: idempotency key missing")
	// ErrNoHandler: Handle was called on a Processor built without a
	// Handler or a Target.
	ErrNoHandler = errors.New("sqsonce: Processor has no Handler or Target")
	// ErrExited: the function neither returned nor panicked: it called
	// runtime.Goexit (as t.FailNow does). It counts as a failure.
	ErrExited = errors.New("sqsonce: function exited without returning (runtime.Goexit)")
)

// PayloadMismatchError is a refused acquisition whose key is held for
// another payload. It matches ErrPayloadMismatch.
type PayloadMismatchError struct {
	ID     string
	Status store.Status
}

// Error describes the failure in one line.
func (e *PayloadMismatchError) Error() string {
	return fmt.Sprintf("sqsonce: record %q is %s for another payload: the same key with a different message is a conflict, not a duplicate", e.ID, e.Status)
}

// Is makes errors.Is match ErrPayloadMismatch.
func (e *PayloadMismatchError) Is(target error) bool { return target == ErrPayloadMismatch }

// PanicError is a function's panic, turned into its failure.
type PanicError struct {
	Value any
	Stack []byte
}

// Error describes the failure in one line.
func (e *PanicError) Error() string {
	return fmt.Sprintf("function panicked: %v\n%s", e.Value, e.Stack)
}
