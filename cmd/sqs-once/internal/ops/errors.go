package ops

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// The errors a command ends with; each has its exit code (see ExitCode).
var (
	// ErrUsage: bad flags or arguments, or a target (queue, table) that
	// neither --stack nor a flag gave.
	ErrUsage = errors.New("usage")
	// ErrNotFound: the key has no record, or a queue, stack or function
	// does not exist.
	ErrNotFound = errors.New("not found")
	// ErrNoTable: the idempotency table does not exist. Its own error, not
	// ErrNotFound: a missing table is a broken stack, not a key that was
	// never seen, and a script must not take one for the other.
	ErrNoTable = errors.New("no such table")
	// ErrRefused: the command would be unsafe as asked (a live lock without
	// --force, a record in another state than the command is for).
	ErrRefused = errors.New("refused")
	// ErrChanged: the record changed between the read and the write; nothing
	// was written. Look again.
	ErrChanged = errors.New("record changed since it was read")
	// ErrDeclined: the operator did not confirm.
	ErrDeclined = errors.New("not confirmed")
	// ErrAWS: an AWS call failed (credentials, permissions, throttling, the
	// network). Nothing is known to have changed unless the message says so.
	ErrAWS = errors.New("AWS call failed")
	// ErrIncomplete: a redrive ended with messages it could not move, or was
	// interrupted; the summary says which and why. A cutover that stopped
	// between two mappings. A send-pending whose messages were not all
	// sent.
	ErrIncomplete = errors.New("incomplete")
	// ErrCheckFailed: a preflight check failed; its output says what to
	// change.
	ErrCheckFailed = errors.New("preflight check failed")
)

// Exit codes, for scripts.
const (
	ExitOK          = 0
	ExitError       = 1 // ErrAWS or anything unexpected
	ExitUsage       = 2
	ExitRefused     = 3 // ErrRefused, ErrChanged, ErrDeclined
	ExitNotFound    = 4
	ExitIncomplete  = 5 // a redrive that left messages behind, a cutover stopped half-way, messages not all sent
	ExitCheckFailed = 6
	ExitNoTable     = 7 // ErrNoTable: the idempotency table does not exist
)

// ExitCode is the process exit code for err.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrUsage):
		return ExitUsage
	case errors.Is(err, ErrNoTable):
		return ExitNoTable
	case errors.Is(err, ErrRefused), errors.Is(err, ErrChanged), errors.Is(err, ErrDeclined):
		return ExitRefused
	case errors.Is(err, ErrNotFound):
		return ExitNotFound
	case errors.Is(err, ErrIncomplete):
		return ExitIncomplete
	case errors.Is(err, ErrCheckFailed):
		return ExitCheckFailed
	}
	return ExitError
}

// awsError turns an SDK error into one of the package's: a missing queue is
// ErrNotFound, a missing table ErrNoTable, anything else ErrAWS. The SDK's
// error stays in the chain for a closer look.
func awsError(op string, err error) error {
	var noTable *ddbtypes.ResourceNotFoundException
	if errors.As(err, &noTable) {
		return fmt.Errorf("%s: %w: create it, or point the CLI at the right one (--table, --region); sqs-once preflight names the command: %w", op, ErrNoTable, err)
	}
	var noQueue *sqstypes.QueueDoesNotExist
	if errors.As(err, &noQueue) {
		return fmt.Errorf("%s: %w: %w", op, ErrNotFound, err)
	}
	var api smithy.APIError
	if errors.As(err, &api) && (api.ErrorCode() == "AWS.SimpleQueueService.NonExistentQueue" || api.ErrorCode() == "QueueDoesNotExist") {
		return fmt.Errorf("%s: %w: %w", op, ErrNotFound, err)
	}
	return fmt.Errorf("%s: %w: %w", op, ErrAWS, err)
}

// accessDenied says whether err is AWS refusing the caller: a missing
// permission, or credentials the account does not accept.
func accessDenied(err error) bool {
	var api smithy.APIError
	if !errors.As(err, &api) {
		return false
	}
	code := api.ErrorCode()
	switch code {
	case "AuthorizationError", "InvalidClientTokenId", "UnrecognizedClientException", "ExpiredToken", "ExpiredTokenException", "SignatureDoesNotMatch", "InvalidSignatureException":
		return true
	}
	return strings.Contains(code, "AccessDenied") || strings.Contains(code, "Unauthorized") || strings.Contains(code, "NotAuthorized")
}

// metricUnavailable says whether err is the endpoint not serving a
// CloudWatch call at all, rather than a fault to show. A service that says
// it does not know the operation is the first, on any endpoint. Otherwise
// only an endpoint set in place of AWS's own (custom: AWS_ENDPOINT_URL, an
// emulator) is given the benefit of the doubt, for a 404, 405 or 501, or
// an answer the SDK cannot decode (moto_server answers CloudWatch's RPC v2
// CBOR with a 404 page). On AWS's own endpoint those are faults; and so,
// everywhere, are a refusal (401, 403), throttling (429, or an error code
// the SDK decoded: the service's own words) and a server error: the
// operator must see them.
func metricUnavailable(err error, custom bool) bool {
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "UnknownOperationException", "UnknownOperation", "InvalidAction", "UnsupportedOperation", "UnsupportedOperationException", "NotImplemented", "NotImplementedException":
			return true
		}
	}
	if !custom {
		return false
	}
	status := 0
	var resp *smithyhttp.ResponseError
	if errors.As(err, &resp) {
		status = resp.HTTPStatusCode()
	}
	switch {
	case status == http.StatusNotFound, status == http.StatusMethodNotAllowed, status == http.StatusNotImplemented:
		return true
	case status == http.StatusUnauthorized, status == http.StatusForbidden, status == http.StatusTooManyRequests, status >= 500:
		return false
	}
	var undecodable *smithy.DeserializationError
	return errors.As(err, &undecodable)
}
