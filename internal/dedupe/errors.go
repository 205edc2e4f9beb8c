package dedupe

import (
	"errors"

	"fmt"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"time"
)

var (
	// ErrDuplicate: the key was completed within its dedupe window.
	ErrDuplicate = errors.New("dedupe: already completed")
	// ErrInProgress: another holder's lock on the key has not expired.
	ErrInProgress = errors.New("dedupe: in progress elsewhere")
	// ErrLockLost: the lock expired and another holder took the key over, so
	// this holder must not write its outcome.
	ErrLockLost = errors.New("dedupe: lock lost to another holder")
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
