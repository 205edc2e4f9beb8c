// Package target delivers the messages the processor has locked to what
// consumes them today: a Lambda function (one synchronous invocation per
// batch, in Lambda's own SQS event shape), an SQS queue, an SNS topic or an
// EventBridge bus.
//
// A Target answers per message: accepted, refused for good (ErrRefused: the
// processor sends it to the operator queue), not accepted this time (retried),
// or unknown (ErrOutcomeUnknown: the destination may have acted, so the
// processor keeps the key's lock until it expires instead of releasing it
// for an immediate second delivery).
package target
