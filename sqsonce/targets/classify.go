package targets

import (
	"context"
	"errors"
	"net"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/sqs-once/sqs-once/internal/retrybudget"
)

// What became of a call that failed as a whole.
type fate int

const (
	notApplied fate = iota // the service did not act; a later retry may succeed
	rejected               // the service will never accept it
	ambiguous              // the service may have acted
)

// transientCodes are 4xx answers that say "not now" rather than "never":
// throttling, an expired credential or signature, a function being updated.
var transientCodes = map[string]bool{
	"ExpiredToken":              true,
	"ExpiredTokenException":     true,
	"RequestExpired":            true,
	"RequestTimeTooSkewed":      true,
	"ResourceConflictException": true, // Lambda: the function is being updated
	"KMSThrottlingException":    true,
	"RequestThrottled":          true, // SQS
}

// notRunCodes are Lambda Invoke errors (HTTP 502 and 503) raised before the
// function's code ran: it could not start. Any other 5xx of Invoke may come
// after the function ran.
var notRunCodes = map[string]bool{
	"EC2ThrottledException":                true,
	"EC2UnexpectedException":               true,
	"EC2AccessDeniedException":             true,
	"ENILimitReachedException":             true,
	"SubnetIPAddressLimitReachedException": true,
	"InvalidSubnetIDException":             true,
	"InvalidSecurityGroupIDException":      true,
	"ResourceNotReadyException":            true,
	"KMSAccessDeniedException":             true,
	"KMSDisabledException":                 true,
	"KMSInvalidStateException":             true,
	"KMSNotFoundException":                 true,
	"InvalidRuntimeException":              true,
	"InvalidZipFileException":              true,
	"EFSMountConnectivityException":        true,
	"EFSMountFailureException":             true,
	"EFSMountTimeoutException":             true,
	"SnapStartNotReadyException":           true,
	"SnapStartTimeoutException":            true,
	"SnapStartException":                   true,
}

// classify says what a failed call's error means for its messages. invoke
// is for Lambda's Invoke, whose 5xx answers other than notRunCodes may come
// after the function ran.
func classify(err error, invoke bool) fate {
	var ae smithy.APIError
	status := 0
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	if errors.As(err, &ae) {
		code := ae.ErrorCode()
		if _, throttle := retry.DefaultThrottleErrorCodes[code]; throttle || transientCodes[code] || status == 429 {
			return notApplied
		}
		if invoke && notRunCodes[code] {
			return notApplied
		}
		if status >= 400 && status < 500 {
			return rejected
		}
		if status == 0 && ae.ErrorFault() == smithy.FaultClient {
			return rejected
		}
		return ambiguous
	}
	if notSent(err) {
		return notApplied
	}
	return ambiguous
}

// notSent reports an error raised before the request left: no connection
// could be made, or the name did not resolve. A context that ended is not
// among them: it may have ended after the request was sent.
func notSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	var noTime *retrybudget.NoTimeError
	if errors.As(err, &noTime) {
		return notSent(noTime.Err)
	}
	return false
}

// callError is the error each message of a failed call gets.
func callError(err error, invoke bool) error {
	switch classify(err, invoke) {
	case rejected:
		return refused(err)
	case ambiguous:
		return unknown(err)
	}
	return err
}

// invokeRetryer retries an Invoke only when the function cannot have run
// (throttled, not started, no connection): a retry after a lost answer
// would run the consumer twice, the duplicate sqs-once exists to prevent.
func invokeRetryer() aws.Retryer {
	return retrybudget.Client(retry.NewStandard(func(o *retry.StandardOptions) {
		o.Retryables = []retry.IsErrorRetryable{retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return aws.FalseTernary
			}
			if classify(err, true) == notApplied {
				return aws.TrueTernary
			}
			return aws.FalseTernary
		})}
	}))
}
