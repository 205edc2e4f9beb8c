package dedupe

import (
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

var (
	// ErrDuplicate: the key was completed within its dedupe window.
	ErrDuplicate = errors.New("dedupe: already completed")
	// ErrInProgress: another holder's lock on the key has not expired.
	ErrInProgress = errors.New("dedupe: in progress elsewhere")
	// ErrLockLost: the lock expired and another holder took the key over (or
	// the lock could not be renewed before it expired), so this holder must
	// stop and must not write its outcome. It is also the cause of the
	// function's context when a renewal finds the lock lost.
	ErrLockLost = errors.New("dedupe: lock lost to another holder")
	// ErrPayloadMismatch: the key is held (completed or in progress) for
	// another payload: a conflict, not a duplicate.
	ErrPayloadMismatch = errors.New("dedupe: same key, different payload")
	// ErrExited: the function neither returned nor panicked: it called
	// runtime.Goexit (as t.FailNow does). It counts as a failure, never as a
	// success.
	ErrExited = errors.New("dedupe: function exited without returning (runtime.Goexit)")
	// ErrUnavailable: the table could not be reached, throttled the call or
	// failed it; the outcome of the operation is unknown or it did not run.
	ErrUnavailable = errors.New("dedupe: store unavailable")
	// ErrMisconfigured: the table does not exist, the function may not use
	// it, or its schema is not the store's; no retry will help until someone
	// fixes the deployment.
	ErrMisconfigured = errors.New("dedupe: store misconfigured")
)

// HeldError is returned by Acquire when the key is held: it says by whom and
// until when, and matches ErrDuplicate or ErrInProgress with errors.Is.
type HeldError struct {
	Key    string
	Status Status
	// Until is when the hold ends: the end of the dedupe window for a
	// completed key, the lock expiry for one in progress.
	Until time.Time
	// PayloadHash is the hash the record holds ("" when none was recorded).
	PayloadHash string
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("dedupe: key %q is %s until %s", e.Key, e.Status, e.Until.UTC().Format(time.RFC3339Nano))
}

func (e *HeldError) Is(target error) bool {
	switch target {
	case ErrDuplicate:
		return e.Status == StatusCompleted
	case ErrInProgress:
		return e.Status == StatusProcessing
	}
	return false
}

// PayloadMismatchError is a refused acquisition whose key is held for another
// payload. It matches ErrPayloadMismatch.
type PayloadMismatchError struct {
	Key    string
	Status Status
}

func (e *PayloadMismatchError) Error() string {
	return fmt.Sprintf("dedupe: key %q is %s for another payload: the same key with a different message is a conflict, not a duplicate", e.Key, e.Status)
}

func (e *PayloadMismatchError) Is(target error) bool { return target == ErrPayloadMismatch }

// RecordError is a record under the key's id that this protocol did not
// write (another application shares the table and prefix, or someone edited
// the item). It matches ErrMisconfigured: no retry helps until someone looks.
type RecordError struct {
	ID      string
	Problem string
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("dedupe: record %q was not written by the lock protocol: %s; another application may share the table and key prefix, or the item was edited by hand", e.ID, e.Problem)
}

func (e *RecordError) Is(target error) bool { return target == ErrMisconfigured }

// PanicError is a function's panic, turned into its failure.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("function panicked: %v\n%s", e.Value, e.Stack)
}

// StoreError is a failed call to the table. It matches ErrMisconfigured or
// ErrUnavailable and unwraps to the SDK's error, so callers can still inspect
// the AWS error code.
type StoreError struct {
	Op  string
	Key string
	Err error
}

func (e *StoreError) Error() string {
	return fmt.Sprintf("dedupe: %s %q: %v", e.Op, e.Key, e.Err)
}

func (e *StoreError) Is(target error) bool {
	switch target {
	case ErrMisconfigured:
		return misconfigured(e.Err)
	case ErrUnavailable:
		return !misconfigured(e.Err)
	}
	return false
}

// misconfigured recognises the errors that a retry cannot fix.
func misconfigured(err error) bool {
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

func (e *StoreError) Unwrap() error { return e.Err }
