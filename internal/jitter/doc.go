// Package jitter computes exponential backoff delays with jitter, as pure
// functions of the attempt number and a random value the caller supplies.
// Every wait and delay of the module is drawn here: the DLQ replayer's
// replay delays (capped at SQS's 900 s), the processor's failure backoff
// (with its own, longer cap) and its hiding of a record in progress, the
// lock's waits for another holder and its retries of a completion. Waiting
// itself is internal/clock's.
package jitter
