package sqsonce

import (
	"errors"
	"fmt"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// Errors a caller tests with errors.Is; the first five are package
// store's own values, so a store's error matches them.
var (
	// ErrDuplicate: the key completed within its window; fn did not run.
	ErrDuplicate = store.ErrDuplicate
	// ErrInProgress: another holder has the key's live lock; fn did not
	// run.
	ErrInProgress = store.ErrInProgress
	// ErrLockLost: the lock was taken over or not renewed in time; it is
	// also the cause of the function's context then: stop, return an error.
	ErrLockLost = store.ErrLockLost
	// ErrUnavailable: the store failed or did not answer; fn did not run
	// (for a completion: its outcome is unknown).
	ErrUnavailable = store.ErrUnavailable
	// ErrMisconfigured: the table is missing, denied, of another schema or
	// holds a foreign record; no retry helps. fn did not run.
	ErrMisconfigured = store.ErrMisconfigured
	// ErrPayloadMismatch: the key is held for another payload: a conflict,
	// not a duplicate.
	ErrPayloadMismatch = errors.New("sqsonce: same key, different payload")
	// ErrNoKey: Do's key is empty, over 1024 bytes or not UTF-8, or a
	// record lacks its key (it is retried, never run).
	ErrNoKey = errors.New("sqsonce: idempotency key missing")
	// ErrNoHandler: Handle on a Processor without a Handler or a Target
	// (one from New).
	ErrNoHandler = errors.New("sqsonce: Processor has no Handler or Target")
	// ErrExited: the function called runtime.Goexit (as t.FailNow does): a
	// failure.
	ErrExited = errors.New("sqsonce: function exited without returning (runtime.Goexit)")
)

// payloadMismatchError is a key held for another payload (record ID, in
// Status); it matches ErrPayloadMismatch.
type payloadMismatchError struct {
	ID     string
	Status store.Status
}

// Error describes the failure in one line.
func (e *payloadMismatchError) Error() string {
	return fmt.Sprintf("sqsonce: record %q is %s for another payload: the same key with a different message is a conflict, not a duplicate", e.ID, e.Status)
}

// Is makes errors.Is match ErrPayloadMismatch.
func (e *payloadMismatchError) Is(target error) bool { return target == ErrPayloadMismatch }

// PanicError is a function's panic (its value and stack), turned into its
// failure. Handle logs the stack in a field of its own (stack), beside the
// error's one line.
type PanicError struct {
	// Value is what the function passed to panic.
	Value any
	// Stack is the panicking goroutine's stack, as runtime/debug.Stack
	// gives it.
	Stack []byte
}

// Error describes the failure in one line: the panic's value, without the
// stack.
func (e *PanicError) Error() string {
	return fmt.Sprintf("sqsonce: function panicked: %v", e.Value)
}
