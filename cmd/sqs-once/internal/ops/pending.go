package ops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// PendingMessage is one of a completed key's emitted messages not yet
// sent (sqsonce.Pending), as inspect and send-pending show it.
type PendingMessage struct {
	// Position is the message's place among the key's messages, from 1.
	Position int `json:"position"`
	// To is the destination: "sqs:<queue URL>", "sns:<topic ARN>" or
	// "events:<bus name or ARN>" (sqsonce.Message.To).
	To string `json:"to"`
	// EmitID is the message's emit id: the sqs-once-emit-id attribute
	// (and a FIFO destination's deduplication id) it is sent with, the
	// same on every send of it.
	EmitID     string            `json:"emitId"`
	GroupID    string            `json:"groupId,omitempty"`
	Body       string            `json:"body"`
	BodyBytes  int               `json:"bodyBytes"`
	Attributes map[string]string `json:"attributes,omitempty"`
}

// pendingMessages are stored's pending messages, as the lock sends them.
func pendingMessages(stored store.Record) ([]PendingMessage, error) {
	out, err := sqsonce.Pending(stored)
	if err != nil {
		return nil, err
	}
	msgs := make([]PendingMessage, len(out))
	for i, m := range out {
		msgs[i] = PendingMessage{Position: i + 1, To: m.To, EmitID: m.ID, GroupID: m.GroupID, Body: m.Body, BodyBytes: len(m.Body), Attributes: m.Attributes}
	}
	return msgs, nil
}

// SendOutcome is what became of one pending message in send-pending.
type SendOutcome struct {
	Position int    `json:"position"`
	To       string `json:"to"`
	EmitID   string `json:"emitId"`
	// Sent: the destination accepted it.
	Sent bool `json:"sent"`
	// Error is why it was not sent: refused, or its answer lost (it may
	// have arrived all the same).
	Error string `json:"error,omitempty"`
}

// SendResult is what send-pending did with a key's pending messages.
type SendResult struct {
	// Record is the record as read before the send; its Pending are the
	// messages sent.
	Record Record `json:"record"`
	// Messages are the pending messages and what became of each; empty
	// when there was nothing to send.
	Messages []SendOutcome `json:"messages"`
	// Marked: every message was accepted and the record marked sent (its
	// outbox removed): the key has nothing pending.
	Marked bool `json:"marked"`
	// SentMeanwhile: a delivery of the key sent the messages between the
	// read and the answer to the question; nothing was sent.
	SentMeanwhile bool `json:"sentMeanwhile,omitempty"`
}

// recordingSender is a Sender that keeps the answers of its one Send, so
// that send-pending can say which messages were accepted.
type recordingSender struct {
	sqsonce.Sender
	called bool
	errs   []error
}

func (s *recordingSender) Send(ctx context.Context, msgs []sqsonce.Outgoing) []error {
	s.called = true
	s.errs = s.Sender.Send(ctx, msgs)
	return s.errs
}

// SendPending sends the pending messages of key's COMPLETED record with
// sender and marks them sent (sqsonce.SendPending), as the key's next
// delivery would. confirm is asked with the record read; false cancels
// with ErrDeclined. The record is read again after the answer: messages a
// delivery sent meanwhile are not sent again, and a record that is no
// longer the completion read is refused with ErrChanged, nothing sent.
//
// A record with nothing pending is a success with no message. A record
// that is not COMPLETED is a *StateError. Messages not all accepted are
// ErrIncomplete, the record left pending; all accepted and the marking
// refused because the record changed, ErrChanged; the marking failed, the
// store's error.
func (r *Records) SendPending(ctx context.Context, key string, sender sqsonce.Sender, confirm func(Record) (bool, error)) (SendResult, error) {
	rec, err := r.Get(ctx, key)
	if err != nil {
		return SendResult{}, err
	}
	res := SendResult{Record: rec, Messages: []SendOutcome{}}
	if rec.Status != store.StatusCompleted {
		hint := "only a completed key has messages to send"
		if rec.Status == store.StatusProcessing {
			hint = "its work has not completed: nothing it emits is committed, and its holder sends its messages once it completes"
		}
		return res, &StateError{Record: rec, Want: store.StatusCompleted, Hint: hint}
	}
	if rec.stored.Outbox == nil {
		return res, nil
	}
	if rec.PendingError != "" {
		return res, fmt.Errorf("key %q (record %s in %s): its pending messages cannot be read, nothing was sent: %s", key, rec.RecordID, r.where(), rec.PendingError)
	}
	ok, err := confirm(rec)
	if err != nil {
		return res, err
	}
	if !ok {
		return res, fmt.Errorf("send-pending %q: %w", key, ErrDeclined)
	}
	again, err := r.Get(ctx, key)
	switch {
	case errors.Is(err, ErrNotFound):
		return res, r.changed(ctx, rec)
	case err != nil:
		return res, err
	case again.Status != store.StatusCompleted || again.Owner != rec.Owner || again.Fence != rec.Fence:
		return res, r.changed(ctx, rec)
	case again.stored.Outbox == nil:
		res.Record, res.SentMeanwhile = again, true
		return res, nil
	case !bytes.Equal(again.stored.Outbox, rec.stored.Outbox):
		return res, r.changed(ctx, rec)
	}
	rs := &recordingSender{Sender: sender}
	err = sqsonce.SendPending(ctx, r.store(), rs, again.stored)
	notSent := 0
	for i, m := range rec.Pending {
		o := SendOutcome{Position: m.Position, To: m.To, EmitID: m.EmitID}
		switch {
		case !rs.called:
			o.Error = "not sent"
		case i >= len(rs.errs):
			o.Error = "the sender gave no answer for it"
		case rs.errs[i] != nil:
			o.Error = rs.errs[i].Error()
		default:
			o.Sent = true
		}
		if !o.Sent {
			notSent++
		}
		res.Messages = append(res.Messages, o)
	}
	n := len(rec.Pending)
	switch {
	case err == nil:
		res.Marked = true
		return res, nil
	case !rs.called:
		return res, fmt.Errorf("send-pending %q: nothing was sent: %w", key, err)
	case notSent > 0:
		return res, fmt.Errorf("send-pending %q: %d of %s not sent, the record keeps its messages pending: run send-pending again, or let the next delivery of the key send them, with the same emit ids (a receiver that drops repeats by %s gets each once): %w: %w",
			key, notSent, count(n, "message", "messages"), sqsonce.AttrEmitID, ErrIncomplete, err)
	case errors.Is(err, store.ErrRecordChanged):
		return res, fmt.Errorf("send-pending %q: %s sent, and marking them sent found the record changed: %w: %w", key, count(n, "message", "messages"), ErrChanged, err)
	}
	return res, r.fail("mark the messages of "+rec.RecordID+" sent in "+r.where(), err)
}

// previewRunes is how much of a body inspect shows.
const previewRunes = 60

// preview is the start of body, previewRunes at most, quoted with Go's
// escapes (a newline, a control character or an invalid byte cannot
// reach the terminal as it is), "..." after it when there is more.
func preview(body string) string {
	end := 0
	for runes := 0; end < len(body) && runes < previewRunes; runes++ {
		_, size := utf8.DecodeRuneInString(body[end:])
		end += size
	}
	q := strconv.Quote(body[:end])
	if end < len(body) {
		q += "..."
	}
	return q
}

// shown is s as it is when it prints as one plain word, else quoted.
func shown(s string) string {
	if s == "" || strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '"' }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// messageWords is one pending message on one line: its destination, emit
// id, group, body size and start, and how many attributes it has.
func messageWords(m PendingMessage) string {
	parts := []string{"to " + shown(m.To), "emit id " + shown(m.EmitID)}
	if m.GroupID != "" {
		parts = append(parts, "group "+shown(m.GroupID))
	}
	parts = append(parts, count(m.BodyBytes, "byte", "bytes")+" "+preview(m.Body), count(len(m.Attributes), "attribute", "attributes"))
	return strings.Join(parts, ", ")
}

// pendingLines are inspect's lines for a record's pending messages: what
// sends them, then one line per message. None when nothing is pending.
func pendingLines(r Record) [][2]string {
	if r.PendingError != "" {
		return [][2]string{{"pending", "messages not yet sent, unreadable: " + r.PendingError + ": neither a delivery of the key nor sqs-once send-pending can send them"}}
	}
	if len(r.Pending) == 0 {
		return nil
	}
	n := count(len(r.Pending), "message", "messages")
	head := fmt.Sprintf("%s not yet sent: the next delivery of the key sends them (and is then deleted as a duplicate), or sqs-once send-pending %s sends them now", n, shown(r.Key))
	if r.Status == store.StatusCompleted && r.Remaining <= 0 {
		head = fmt.Sprintf("%s never sent, and the window has ended: the next delivery of the key runs the handler again and drops them (that run emits its own, with other emit ids); sqs-once send-pending %s sends these now", n, shown(r.Key))
	}
	lines := [][2]string{{"pending", head}}
	for _, m := range r.Pending {
		lines = append(lines, [2]string{fmt.Sprintf("  #%d", m.Position), messageWords(m)})
	}
	return lines
}
