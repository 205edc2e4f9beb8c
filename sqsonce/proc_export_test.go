package sqsonce

import (
	"context"
	"time"
)

// NewProcessorForTest is newProcessor for the external tests (package
// sqsonce_test), which need it to run Handle on the in-memory store with
// an SQS fake, a renewal timer and a completion sleep of their own. sqs may
// be any value with the SQS client's methods the processor calls; nil
// values mean the real ones, as in New.
func NewProcessorForTest(cfg Config, h Handler, sqs sqsAPI, after func(time.Duration) <-chan time.Time, sleep func(context.Context, time.Duration) error) (*Processor, error) {
	return newProcessor(cfg, h, deps{sqs: sqs, after: after, sleep: sleep})
}
