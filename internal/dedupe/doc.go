// Package dedupe is the idempotency lock protocol over one DynamoDB table: a
// conditional write takes a PROCESSING lock with a timeout, success marks the
// key COMPLETED for a dedupe window, failure releases the lock.
//
// Store holds the three table operations, each a single conditional call;
// Guard runs a function under the protocol and reports what happened.
package dedupe
