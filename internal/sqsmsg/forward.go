package sqsmsg

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// FromRecord is a Lambda SQS record as an entry to send on: the same body,
// attributes and message group, keyed by its messageId.
func FromRecord(rec events.SQSMessage) Entry {
	return Entry{
		RecordID:   rec.MessageId,
		Body:       rec.Body,
		Attributes: Attributes(rec.MessageAttributes),
		GroupID:    rec.Attributes["MessageGroupId"],
	}
}

// ForwardEntry is rec as a message for an operator queue: body and
// attributes unchanged, plus, where there is room, sqs-once-reason and
// sqs-dlq-original-message-id (so a message an operator sends back to the main
// queue is still recognised by the processor's idempotency). On a FIFO
// operator queue the message keeps its group, or gets its own id as group so
// one stuck message blocks no other, and a retried forward of the same record
// is deduplicated.
func ForwardEntry(rec events.SQSMessage, operatorQueueURL, reason string) Entry {
	e := FromRecord(rec)
	e.SetAttribute(AttrReason, String(reason))
	if _, ok := OriginalMessageID(rec); !ok {
		e.SetAttribute(AttrOriginalMessageID, String(rec.MessageId))
	}
	if IsFIFO(operatorQueueURL) {
		if e.GroupID == "" {
			e.GroupID = rec.MessageId
		}
		e.DeduplicationID = DeduplicationID("operator", rec.MessageId)
	}
	return e
}

// IsFIFO reports whether the queue URL names a FIFO queue.
func IsFIFO(queueURL string) bool { return strings.HasSuffix(queueURL, ".fifo") }

// DeduplicationID is a valid MessageDeduplicationId (64 hex digits) derived
// from parts, whatever their characters and length.
func DeduplicationID(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:])
}
