// Package targets delivers the records a sqsonce.Processor has locked to
// what consumes them today: a Lambda function (ToFunction: one synchronous
// invocation per batch, in Lambda's own SQS event shape), an SQS queue
// (ToQueue), an SNS topic (ToTopic), an EventBridge bus (ToBus), a Step
// Functions state machine (ToStateMachine: one execution per key, named
// after it) or a Lambda durable function (ToDurableFunction: one durable
// execution per key, likewise). FromEnv reads the deployed processor's
// TARGET.
//
// It is a package of its own so that a program without a target links none
// of the Lambda, SNS and EventBridge clients.
//
// A target answers per message: accepted, refused for good
// (sqsonce.ErrTargetRefused: the processor sends it to the operator queue),
// not accepted this time (retried), or unknown (sqsonce.ErrOutcomeUnknown:
// the destination may have acted, so the processor keeps the key's lock
// until it expires instead of releasing it for an immediate second
// delivery).
package targets
