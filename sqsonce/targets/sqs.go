package targets

import (
	"context"
	"errors"
	"strconv"

	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/sqsonce"
)

// The message attributes a forwarded message carries, where it has room
// for them (SQS and SNS allow 10 per message; the message's own come first).
const (
	// AttrKey is the record's idempotency key: a consumer of the destination
	// deduplicates on it.
	AttrKey = "sqs-once-key"
	// AttrFence is the fencing token of the lock the message was sent under.
	AttrFence = "sqs-once-fence"
)

// SQSTarget sends each message to a queue with SendMessageBatch: body and
// message attributes byte for byte, plus AttrKey and AttrFence where there
// is room. On a FIFO queue the message group is the source's, or the key on
// a standard source, and the deduplication id is derived from the key, so
// SQS itself drops a second send of a key within its 5-minute window.
type SQSTarget struct {
	API      sqsmsg.BatchSender
	QueueURL string
}

// Deliver sends the messages, ten calls at once, a FIFO group's in order.
func (t *SQSTarget) Deliver(ctx context.Context, msgs []sqsonce.Delivery) []error {
	fifo := sqsmsg.IsFIFO(t.QueueURL)
	entries := make([]sqsmsg.Entry, len(msgs))
	for i, m := range msgs {
		e := sqsmsg.FromRecord(m.Record)
		e.RecordID = strconv.Itoa(i)
		e.SetAttribute(AttrKey, sqsmsg.String(m.Key))
		e.SetAttribute(AttrFence, sqsmsg.String(strconv.FormatInt(m.Fence, 10)))
		e.GroupID = ""
		if fifo {
			e.GroupID = groupID(m)
			e.DeduplicationID = sqsmsg.DeduplicationID("sqs-once", m.Key)
		}
		entries[i] = e
	}
	failed := sqsmsg.SendBatches(ctx, t.API, callsInFlight, sqsmsg.Batch{QueueURL: t.QueueURL, Entries: entries})
	errs := make([]error, len(msgs))
	for id, err := range failed {
		i, _ := strconv.Atoi(id)
		errs[i] = sqsEntryError(err)
	}
	return errs
}

func sqsEntryError(err error) error {
	var entry *sqsmsg.EntryError
	switch {
	case errors.As(err, &entry):
		if entry.SenderFault {
			return refused(err)
		}
		return err
	case errors.Is(err, sqsmsg.ErrTooLarge):
		return refused(err)
	case errors.Is(err, sqsmsg.ErrNotSent):
		return err
	case errors.Is(err, sqsmsg.ErrNotConfirmed):
		return unknown(err)
	}
	return callError(err, false)
}

// groupPattern is what SQS and SNS accept as a MessageGroupId; compiled on
// first use, as the patterns of spec.go are.
var groupPattern = lazyRegexp("^[a-zA-Z0-9!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~]{1,128}$")

// groupID is a FIFO destination's message group: the source's group on a
// FIFO source, else the key (one key's messages in order, others in
// parallel); a value SQS would refuse is replaced by its hash.
func groupID(m sqsonce.Delivery) string {
	g := m.Record.Attributes["MessageGroupId"]
	if g == "" {
		g = m.Key
	}
	if !groupPattern().MatchString(g) {
		return sqsmsg.DeduplicationID("group", g)
	}
	return g
}
