// Package processor is the Lambda handler that consumes an SQS queue through
// the idempotency lock of package dedupe and answers with a partial batch
// response, so that each message's business handler runs once per key.
package processor
