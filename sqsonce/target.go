package sqsonce

import (
	"context"
	"errors"

	"github.com/aws/aws-lambda-go/events"
)

// Target receives the records a Processor holds the locks of, instead of a
// Handler; package sqsonce/targets implements it with Target, Delivery and
// the errors below (a Lambda function, a queue, a topic, a bus).
type Target interface {
	// Deliver sends msgs (a FIFO group's in order) and returns one error
	// per message: nil when accepted, ErrTargetRefused when it never will
	// be, ErrOutcomeUnknown when it may have been, ErrAlreadyStarted when
	// the target already holds this key's execution for this payload, an
	// error matching ErrPayloadMismatch when it holds it for another
	// payload, any other to retry.
	Deliver(ctx context.Context, msgs []Delivery) []error
}

// Delivery is one record for a Target with its lock's key and fence.
type Delivery struct {
	// Record is the SQS record, as the event source mapping delivered it.
	Record events.SQSMessage
	// Key is the record's key, as the Config's Key function made it.
	Key string
	// Fence is the lock's fencing token for this delivery.
	Fence int64
	// RecordKey is the key as the lock's record holds it: Key, or its
	// HashKey with Config.HashKeys (as Outcome.Key shows it). A target
	// derives an execution's name from it, so that a hashed key's text
	// never reaches a name.
	RecordKey string
	// PayloadHash is the SHA-256 of the record's body, in hex, as
	// Config.ValidatePayload compares it: a target that starts a named
	// execution keeps it in the execution's input, to tell a redelivery of
	// the same message from another payload under the same key.
	PayloadHash string
}

var (
	// ErrTargetRefused: refused for good (denied, no such destination, too
	// large); forwarded to the operator queue when there is one.
	ErrTargetRefused = errors.New("sqsonce: target refused the message")
	// ErrOutcomeUnknown: the target may have acted, no answer says so; the
	// lock is kept until it expires, not released for a second delivery.
	ErrOutcomeUnknown = errors.New("sqsonce: target outcome unknown")
	// ErrAlreadyStarted: the target already holds an execution under this
	// key's name, started for the same payload (an earlier delivery whose
	// completion was never written: a crash, a lost answer). The record
	// completes and is deleted, counted as KindAlreadyStarted.
	ErrAlreadyStarted = errors.New("sqsonce: target already started this key's execution")
)

// sourceChecker is a Target that can tell when it would send the records
// back to the queue they come from (an sqs target naming it): Handle then
// refuses the event instead of looping for ever.
type sourceChecker interface {
	CheckSource(eventSourceARN string) error
}
