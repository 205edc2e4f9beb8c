// Package jitter computes exponential backoff delays with jitter, as pure
// functions of the attempt number and a random value the caller supplies.
// The DLQ replayer uses it for replay delays (capped at SQS's 900 s), the
// processor for its failure backoff (with its own, longer cap).
package jitter
