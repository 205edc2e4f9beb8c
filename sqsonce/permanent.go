package sqsonce

import "errors"

// PermanentError marks a business failure that no retry can fix, such as a
// body that will never parse.
type PermanentError struct{ Err error }

// Error describes the failure in one line.
func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }

// Unwrap returns the cause, for errors.Is and errors.As.
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent marks err as permanent. With Config.OperatorQueueURL set, the message
// goes straight to the operator queue instead of burning its retries;
// without it, it is retried like any failure.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// IsPermanent reports whether err, or an error it wraps, was marked Permanent.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}
