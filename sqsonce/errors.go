package sqsonce

import (
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// Errors a caller tests with errors.Is.
var (
	// ErrDuplicate: the key already completed within its window; the
	// function did not run.
	ErrDuplicate = errors.New("sqsonce: already completed")
	// ErrInProgress: another holder has the key's live lock; the function
	// did not run.
	ErrInProgress = errors.New("sqsonce: in progress elsewhere")
	// ErrPayloadMismatch: the key is held (completed or in progress) for
	// another payload: a conflict, not a duplicate.
	ErrPayloadMismatch = errors.New("sqsonce: same key, different payload")
	// ErrLockLost: the lock was taken over or could not be renewed before
	// it expired, so its holder must stop and must not write its outcome.
	// It is also the cause of a handler's context when a renewal finds the
	// lock lost: stop, and return an error.
	ErrLockLost = errors.New("sqsonce: lock lost to another holder")
	// ErrUnavailable: the store failed, throttled or did not answer; the
	// function did not run (or, for a completion, its outcome is unknown).
	ErrUnavailable = errors.New("sqsonce: store unavailable")
	// ErrMisconfigured: the table is missing, denied, of another schema, or
	// holds a record the protocol did not write; no retry helps until
	// someone fixes the deployment. The function did not run.
	ErrMisconfigured = errors.New("sqsonce: store misconfigured")
	// ErrNoKey: Do's key is empty, longer than 1024 bytes or not valid
	// UTF-8, or a record lacks the key its Config.Key names (the record is
	// retried, never run).
	ErrNoKey = errors.New("sqsonce: idempotency key missing")
	// ErrNoHandler: Handle was called on a Processor built without a
	// Handler or a Target.
	ErrNoHandler = errors.New("sqsonce: Processor has no Handler or Target")
	// ErrNotFound: Store.Read found no record under the id.
	ErrNotFound = errors.New("sqsonce: no record")
	// ErrRecordChanged: Store.Forget found the record changed since it was
	// read; nothing was written.
	ErrRecordChanged = errors.New("sqsonce: record changed since it was read")
	// ErrExited: the function neither returned nor panicked: it called
	// runtime.Goexit (as t.FailNow does). It counts as a failure.
	ErrExited = errors.New("sqsonce: function exited without returning (runtime.Goexit)")
)

// HeldError is Store.Acquire's refusal: the record that holds the key. It
// matches ErrDuplicate for a completed record and ErrInProgress for a live
// lock.
type HeldError struct {
	Record Record
}

// Until is when the hold ends: the end of the window for a completed key,
// the lock's expiry for one in progress.
func (e *HeldError) Until() time.Time {
	if e.Record.Status == StatusCompleted {
		return e.Record.ExpiresAt
	}
	return e.Record.LockExpiresAt
}

// Error describes the failure in one line.
func (e *HeldError) Error() string {
	return fmt.Sprintf("sqsonce: record %q is %s until %s", e.Record.ID, e.Record.Status, e.Until().UTC().Format(time.RFC3339Nano))
}

// Is makes errors.Is match ErrDuplicate or ErrInProgress.
func (e *HeldError) Is(target error) bool {
	switch target {
	case ErrDuplicate:
		return e.Record.Status == StatusCompleted
	case ErrInProgress:
		return e.Record.Status == StatusProcessing
	}
	return false
}

// PayloadMismatchError is a refused acquisition whose key is held for
// another payload. It matches ErrPayloadMismatch.
type PayloadMismatchError struct {
	ID     string
	Status Status
}

// Error describes the failure in one line.
func (e *PayloadMismatchError) Error() string {
	return fmt.Sprintf("sqsonce: record %q is %s for another payload: the same key with a different message is a conflict, not a duplicate", e.ID, e.Status)
}

// Is makes errors.Is match ErrPayloadMismatch.
func (e *PayloadMismatchError) Is(target error) bool { return target == ErrPayloadMismatch }

// RecordError is a record under the key's id that the protocol did not
// write (another application shares the table and prefix, or someone edited
// the item). It matches ErrMisconfigured.
type RecordError struct {
	ID      string
	Problem string
}

// Error describes the failure in one line.
func (e *RecordError) Error() string {
	return fmt.Sprintf("sqsonce: record %q was not written by the lock protocol: %s; another application may share the table and key prefix, or the item was edited by hand", e.ID, e.Problem)
}

// Is makes errors.Is match ErrMisconfigured.
func (e *RecordError) Is(target error) bool { return target == ErrMisconfigured }

// PanicError is a function's panic, turned into its failure.
type PanicError struct {
	Value any
	Stack []byte
}

// Error describes the failure in one line.
func (e *PanicError) Error() string {
	return fmt.Sprintf("function panicked: %v\n%s", e.Value, e.Stack)
}

// StoreError is a failed call to the store. It matches ErrMisconfigured or
// ErrUnavailable and unwraps to the cause (for the DynamoDB store, the
// SDK's error, so a caller can still read the AWS error code).
type StoreError struct {
	Op  string
	ID  string
	Err error
}

// Error describes the failure in one line.
func (e *StoreError) Error() string {
	return fmt.Sprintf("sqsonce: %s %q: %v", e.Op, e.ID, e.Err)
}

// Is makes errors.Is match ErrMisconfigured for what no retry fixes (no
// table, access denied, a schema that refuses the key), ErrUnavailable
// otherwise.
func (e *StoreError) Is(target error) bool {
	switch target {
	case ErrMisconfigured:
		return misconfigured(e.Err)
	case ErrUnavailable:
		return !misconfigured(e.Err)
	}
	return false
}

// Unwrap returns the cause, for errors.Is and errors.As.
func (e *StoreError) Unwrap() error { return e.Err }

// misconfigured recognises the errors that a retry cannot fix.
func misconfigured(err error) bool {
	if errors.Is(err, ErrMisconfigured) {
		return true
	}
	var notFound *types.ResourceNotFoundException
	if errors.As(err, &notFound) {
		return true
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "AccessDeniedException", "ValidationException", "UnrecognizedClientException":
			return true
		}
	}
	return false
}

// lockLost is the error of an owner-conditional write refused because the
// record is no longer the lease's: now says what holds it (nil: gone).
func lockLost(op string, lease Lease, now *Record) error {
	what := "the refusal names no record: it is gone, or the store does not say"
	if now != nil {
		what = "the record is " + now.String()
	}
	return fmt.Errorf("%s %q: %w (%s)", op, lease.ID, ErrLockLost, what)
}
