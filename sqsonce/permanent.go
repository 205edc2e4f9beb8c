package sqsonce

import "errors"

// permanentError marks a business failure that no retry can fix, such as a
// body that will never parse.
type permanentError struct{ Err error }

// Error describes the failure in one line.
func (e *permanentError) Error() string { return "permanent: " + e.Err.Error() }

// Unwrap returns the cause, for errors.Is and errors.As.
func (e *permanentError) Unwrap() error { return e.Err }

// Permanent marks err as a failure no retry fixes: the record goes to
// ConsumerConfig.OperatorQueueURL at once, or is retried without one.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{Err: err}
}

// IsPermanent reports whether err, or an error it wraps, was marked Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}
