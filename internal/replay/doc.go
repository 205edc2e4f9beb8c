// Package replay is the DLQ replayer Lambda: it re-sends each dead letter to
// the main queue with an exponential, jittered delay, counting replays in the
// sqs-dlq-replay-nb attribute, and hands messages it must not replay (out of
// attempts, older than MAX_MESSAGE_AGE, unreadable) to an operator queue with
// the reason. A FIFO main queue refuses per-message delays, so there a dead
// letter waits out its backoff hidden in the FIFO DLQ, holding up its group,
// and is sent when it comes back. A record leaves the DLQ only once its
// destination has accepted it.
package replay
