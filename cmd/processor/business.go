package main

import (
	"context"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/sqsonce"
)

var _ sqsonce.Handler = handleMessage

// handleMessage is the business handler: replace its body with your own
// side effect (charge, e-mail, API call). It runs at most once per
// idempotency key within the dedupe window; return an error to retry the
// message, sqsonce.Permanent(err) for one no retry can fix.
//
// The shipped handler only logs: the message's id, key and size, never its
// body, which may carry personal data.
func handleMessage(ctx context.Context, msg events.SQSMessage) error {
	slog.InfoContext(ctx, "message handled",
		"messageId", msg.MessageId,
		"key", sqsonce.Key(ctx),
		"fence", sqsonce.Fence(ctx),
		"bytes", len(msg.Body))
	return nil
}
