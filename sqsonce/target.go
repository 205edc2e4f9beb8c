package sqsonce

import (
	"context"
	"errors"

	"github.com/aws/aws-lambda-go/events"
)

// Target receives the records a Processor holds the locks of, instead of a
// Handler: what consumes the queue today. Package sqsonce/targets has the
// targets for a Lambda function, an SQS queue, an SNS topic and an
// EventBridge bus; sqsonce itself links none of their clients.
type Target interface {
	// Deliver sends msgs (a FIFO message group's records in queue order)
	// and returns one error per message, at the same index: nil when the
	// destination accepted it, an error matching ErrTargetRefused when it
	// never will, ErrOutcomeUnknown when it may have acted, any other error
	// when it did not act and a retry may succeed. ctx's deadline bounds the
	// calls and their retries.
	Deliver(ctx context.Context, msgs []Delivery) []error
}

// Delivery is one record for a Target, with the key and fencing token of
// the lock it is delivered under: both travel with the message where the
// destination can carry them.
type Delivery struct {
	Record events.SQSMessage
	Key    string
	Fence  int64
}

var (
	// ErrTargetRefused: the target refused the message for a reason no
	// retry fixes (access denied, no such destination, too large). With an
	// operator queue, the record goes there with reason target-refused.
	ErrTargetRefused = errors.New("sqsonce: target refused the message")
	// ErrOutcomeUnknown: the target may have acted, but no answer says so
	// (a timeout, a connection lost after the request was sent). The record
	// keeps its lock until it expires instead of being released for an
	// immediate second delivery.
	ErrOutcomeUnknown = errors.New("sqsonce: target outcome unknown")
)

// sourceChecker is a Target that can tell when it would send the records
// back to the queue they come from (an sqs target naming it): Handle then
// refuses the event instead of looping for ever.
type sourceChecker interface {
	CheckSource(eventSourceARN string) error
}
