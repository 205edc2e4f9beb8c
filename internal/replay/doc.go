// Package replay is the DLQ replayer Lambda: it re-sends each dead letter to
// the main queue with an exponential, jittered delay, counting replays in the
// sqs-dlq-replay-nb attribute, and hands messages it must not replay to an
// operator queue with the reason. A record leaves the DLQ only once its
// destination has accepted it.
package replay
