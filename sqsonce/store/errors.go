package store

import (
	"errors"
	"fmt"
	"time"
)

// Errors a store's caller tests with errors.Is. Package sqsonce gives the
// first five the same values under its own names (sqsonce.ErrDuplicate is
// ErrDuplicate), since its callers test them too. Their text keeps the
// "sqsonce:" prefix the logs have always shown.
var (
	// ErrDuplicate: the key already completed within its window
	// (HeldError of a COMPLETED record).
	ErrDuplicate = errors.New("sqsonce: already completed")
	// ErrInProgress: another holder has the key's live lock (HeldError of
	// a PROCESSING record).
	ErrInProgress = errors.New("sqsonce: in progress elsewhere")
	// ErrLockLost: the lock was taken over or could not be renewed before
	// it expired, so its holder must stop and must not write its outcome.
	ErrLockLost = errors.New("sqsonce: lock lost to another holder")
	// ErrUnavailable: the store failed, throttled or did not answer; a
	// retry may succeed.
	ErrUnavailable = errors.New("sqsonce: store unavailable")
	// ErrMisconfigured: the table is missing, denied, of another schema, or
	// holds a record the protocol did not write; no retry helps until
	// someone fixes the deployment.
	ErrMisconfigured = errors.New("sqsonce: store misconfigured")
	// ErrNotFound: Store.Read found no record under the id.
	ErrNotFound = errors.New("sqsonce: no record")
	// ErrRecordChanged: Admin.Forget found the record changed since it was
	// read; nothing was written.
	ErrRecordChanged = errors.New("sqsonce: record changed since it was read")
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

// StoreError is a failed call to the store. It matches ErrMisconfigured
// when its cause does (a store sorts its own client's errors: a missing
// table, denied access, a schema that refuses the key), ErrUnavailable
// otherwise, and unwraps to the cause (for the DynamoDB store, the SDK's
// error, so a caller can still read the AWS error code).
type StoreError struct {
	Op  string
	ID  string
	Err error
}

// Error describes the failure in one line, naming the record when the call
// was about one (a check of the store, for one, is about none: no empty
// id is shown).
func (e *StoreError) Error() string {
	if e.ID == "" {
		return fmt.Sprintf("sqsonce: %s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("sqsonce: %s %q: %v", e.Op, e.ID, e.Err)
}

// Is makes errors.Is match ErrMisconfigured for what no retry fixes,
// ErrUnavailable otherwise: a cause a store did not sort is taken for a
// failure a retry may fix.
func (e *StoreError) Is(target error) bool {
	switch target {
	case ErrMisconfigured:
		return errors.Is(e.Err, ErrMisconfigured)
	case ErrUnavailable:
		return !errors.Is(e.Err, ErrMisconfigured)
	}
	return false
}

// Unwrap returns the cause, for errors.Is and errors.As.
func (e *StoreError) Unwrap() error { return e.Err }
