package dynamostore

import (
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// misconfigured recognises the errors that a retry cannot fix: no table,
// access denied, a schema that refuses the key, unknown credentials; and,
// of a transaction, a request the endpoint does not know (dynalite has no
// TransactWriteItems) or a token reused with other parameters.
func misconfigured(err error) bool {
	if errors.Is(err, store.ErrMisconfigured) {
		return true
	}
	var notFound *types.ResourceNotFoundException
	if errors.As(err, &notFound) {
		return true
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "AccessDeniedException", "ValidationException", "UnrecognizedClientException",
			"UnknownOperationException", "IdempotentParameterMismatchException":
			return true
		}
	}
	return false
}

// misconfiguredError is an SDK error that misconfigured recognised: it
// matches store.ErrMisconfigured, so a store.StoreError around it does,
// with the SDK's text unchanged and the SDK's error still within reach of
// errors.As.
type misconfiguredError struct{ err error }

func (e misconfiguredError) Error() string        { return e.err.Error() }
func (e misconfiguredError) Unwrap() error        { return e.err }
func (e misconfiguredError) Is(target error) bool { return target == store.ErrMisconfigured }

// lockLost is the error of an owner-conditional write refused because the
// record is no longer the lease's: now says what holds it (nil: gone).
func lockLost(op string, lease store.Lease, now *store.Record) error {
	what := "the refusal names no record: it is gone, or the store does not say"
	if now != nil {
		what = "the record is " + now.String()
	}
	return fmt.Errorf("%s %q: %w (%s)", op, lease.ID, store.ErrLockLost, what)
}
