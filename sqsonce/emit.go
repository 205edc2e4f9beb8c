package sqsonce

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/sqs-once/sqs-once/internal/leasectx"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// Message is a message a work emits (Emit): staged in its lock, committed
// with the key's completion, and sent once the completion is committed.
//
// An "events:" message is an EventBridge event: its Body, a JSON object,
// is the event's detail, to which the Sender adds the member
// "sqsOnce" carrying the emit id ({"emitId": "..."}); its
// Attributes may only name the event's source (AttrEventSource) and
// detail-type (AttrEventDetailType), EventBridge having no message
// attributes; it has no GroupID.
type Message struct {
	// To is the destination: "sqs:" and a queue URL, "sns:" and a topic
	// ARN, or "events:" and an EventBridge bus name or ARN. A FIFO queue
	// or topic (its name ends in ".fifo") needs GroupID.
	To string
	// Body is the message, at most MaxMessageBytes of UTF-8; for
	// "events:", a JSON object without the member "sqsOnce".
	Body string
	// Attributes are string message attributes (at most 9 of yours: the
	// tenth is the emit id, AttrEmitID). Their names follow SQS's rules.
	// For "events:", only AttrEventSource and AttrEventDetailType.
	Attributes map[string]string
	// GroupID is the message group of a FIFO destination; refused by a
	// standard one and by an event bus.
	GroupID string
}

// Outgoing is an emitted message as a Sender sends it: the Message and its
// stable ID.
type Outgoing struct {
	Message
	// ID is the message's emit id: derived from the key's record, the
	// completion's fence and the message's position, the same on every
	// send of it. The Sender sends it as the AttrEmitID attribute, and as
	// the MessageDeduplicationId of a FIFO destination.
	ID string
}

// Sender sends a key's committed messages after its completion
// (Config.Sender). targets.NewSender is the one on AWS.
type Sender interface {
	// Send sends msgs and returns one error per message, in order: nil
	// when the destination accepted it. An error is a message that may or
	// may not have arrived (its answer lost) as much as one refused: the
	// lock sends it again, with the same ID, until every one of the key's
	// messages is accepted in one call.
	Send(ctx context.Context, msgs []Outgoing) []error
}

// AttrEmitID is the message attribute that carries an emitted message's
// ID: a downstream sqsonce consumer keyed on it
// (IDEMPOTENCY_KEY=attribute:sqs-once-emit-id) handles each emitted
// message once, however often it was sent.
const AttrEmitID = "sqs-once-emit-id"

// The attributes of an "events:" message, which set its event's source
// and detail-type, the fields EventBridge rules most often match on
// ({"source": [...], "detail-type": [...]}). Unset, the Sender puts
// targets.DefaultEventSource and targets.DefaultDetailType, as the events
// target does. Emit refuses any other attribute on an "events:" message.
const (
	// AttrEventSource is the event's source: 1 to 256 bytes, not starting
	// with "aws." (EventBridge keeps those for AWS's own events).
	AttrEventSource = "source"
	// AttrEventDetailType is the event's detail-type: 1 to 128 bytes.
	AttrEventDetailType = "detail-type"
)

// EventEmitIDPointer is where an emitted event's id is in the message a
// rule delivers to an SQS queue (the whole event, no input path or
// transformer): a downstream sqsonce consumer keyed on it
// (IDEMPOTENCY_KEY=body:/detail/sqsOnce/emitId,
// KeyFromBody(EventEmitIDPointer)) handles each emitted event once,
// however often it was put.
const EventEmitIDPointer = "/detail/" + sqsmsg.EventDetailMember + "/emitId"

// Limits of Emit.
const (
	// MaxMessageBytes is the largest Body Emit takes: SNS's limit for a
	// message (SQS's own is larger), less room for its attributes; on an
	// event bus, EventBridge's 256 KiB for the whole entry less room for
	// its source, detail-type, bus and emit id.
	MaxMessageBytes = 256*1024 - 8*1024
	// maxAttributes is SQS's limit of message attributes, less the emit
	// id's.
	maxAttributes = 9
	// maxMessages bounds one key's messages: each costs the record's item
	// room, and a redelivery sends them all again.
	maxMessages = 100
)

// ErrEmitPending: a key's work is committed, but its emitted messages are
// not all sent (the destination refused, throttled or did not answer, or
// the invocation's time ran out). Handle retries the record; Do returns
// it: call again with the key, and the call sends them (the key is a
// duplicate once they are sent). Nothing runs the work again.
var ErrEmitPending = errors.New("sqsonce: work committed, its emitted messages not all sent")

// outbox is a lock's staged messages, sealed once its work returned.
type outbox struct {
	mu     sync.Mutex
	msgs   []Message
	size   int
	sealed bool
	// noSender: the Processor has no Config.Sender, so nothing staged
	// could ever be sent.
	noSender bool
}

// Emit stages msgs in the lock of the work ctx belongs to (a Handler's,
// Do's or DoResult's function): they are committed with the key's
// completion, in the same write (in the same transaction on a
// store.Transactor), and sent once it is committed, batched per
// destination, by Config.Sender. A work that fails, panics or loses its
// lock commits none, and none is sent. An invocation that ends after the
// commit and before the send leaves the record "completed, messages
// pending" and the message undeleted: its redelivery (or the next Do of
// the key) sends them before it answers "duplicate". Each message carries
// a stable id (AttrEmitID), the same on every send of it, so a receiver
// that drops repeats by it (a downstream sqsonce keyed on it, or a FIFO
// destination's deduplication within five minutes) gets it once. An event
// carries it in its detail (EventEmitIDPointer), EventBridge having no
// message attributes.
//
// Emit refuses, adding none of msgs, with an error naming the limit: no
// lock in ctx; a Processor without Config.Sender; the work has returned
// (store.ErrTxEnded); a destination that is not "sqs:<queue URL>",
// "sns:<topic ARN>" or "events:<bus name or ARN>"; a FIFO destination
// without GroupID, or a standard one or a bus with it; a body over
// MaxMessageBytes or not UTF-8; more than 9 attributes, or one with an
// empty name or value; for a bus, a body that is not a JSON object or has
// the member "sqsOnce", an attribute other than AttrEventSource
// and AttrEventDetailType, a source over 256 bytes or starting with "aws.",
// a detail-type over 128 bytes; more than 100 messages for the key;
// messages whose encoding would not fit the record beside the result
// (store.MaxResultSize).
func Emit(ctx context.Context, msgs ...Message) error {
	ob, ok := leasectx.From(ctx).Outbox.(*outbox)
	if !ok || ob == nil {
		return errors.New("sqsonce.Emit: no lock in the context: call it from the function Handle, Do or DoResult runs, with the context it is given")
	}
	if ob.noSender {
		return errors.New("sqsonce.Emit: the Processor has no Config.Sender to send the messages with (targets.NewSender(awsCfg) on AWS)")
	}
	for i, m := range msgs {
		if err := m.check(); err != nil {
			return fmt.Errorf("sqsonce.Emit: message %d of %d: %w", i+1, len(msgs), err)
		}
	}
	ob.mu.Lock()
	defer ob.mu.Unlock()
	if ob.sealed {
		return fmt.Errorf("sqsonce.Emit: %w", store.ErrTxEnded)
	}
	if n := len(ob.msgs) + len(msgs); n > maxMessages {
		return fmt.Errorf("sqsonce.Emit: %d messages for one key, over the limit of %d", n, maxMessages)
	}
	size := ob.size
	for _, m := range msgs {
		size += m.encodedSize()
	}
	if size > store.MaxResultSize {
		return fmt.Errorf("sqsonce.Emit: the key's messages come to about %d bytes, over the %d the record holds (store.MaxResultSize, DynamoDB's 400 KB item less the record's own attributes): send large payloads by reference", size, store.MaxResultSize)
	}
	for _, m := range msgs {
		m.Attributes = cloneAttrs(m.Attributes)
		ob.msgs = append(ob.msgs, m)
	}
	ob.size = size
	return nil
}

// seal ends the staging and returns the messages staged.
func (ob *outbox) seal() []Message {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	ob.sealed = true
	return ob.msgs
}

func cloneAttrs(a map[string]string) map[string]string {
	if a == nil {
		return nil
	}
	out := make(map[string]string, len(a))
	for k, v := range a {
		out[k] = v
	}
	return out
}

// check refuses a message no destination would take, before it is
// committed: after the commit a refusal could only be retried forever.
func (m Message) check() error {
	kind, dest, _ := strings.Cut(m.To, ":")
	fifo := strings.HasSuffix(dest, ".fifo")
	switch {
	case kind == "sqs" && (strings.HasPrefix(dest, "https://") || strings.HasPrefix(dest, "http://")):
	case kind == "sns" && strings.HasPrefix(dest, "arn:") && strings.Contains(dest, ":sns:"):
	case kind == "events":
		return m.checkEvent(dest)
	default:
		return fmt.Errorf("destination %q: want \"sqs:\" and a queue URL, \"sns:\" and a topic ARN, or \"events:\" and a bus name or ARN", m.To)
	}
	switch {
	case fifo && m.GroupID == "":
		return fmt.Errorf("destination %s is FIFO: set GroupID", m.To)
	case !fifo && m.GroupID != "":
		return fmt.Errorf("destination %s is not FIFO: GroupID %q is refused there", m.To, m.GroupID)
	case len(m.GroupID) > 128:
		return fmt.Errorf("GroupID of %d bytes, over 128", len(m.GroupID))
	case m.Body == "":
		return errors.New("empty body: SQS and SNS refuse it")
	}
	if err := m.checkBody(); err != nil {
		return err
	}
	if len(m.Attributes) > maxAttributes {
		return fmt.Errorf("%d attributes, over %d (SQS's 10, less the emit id's)", len(m.Attributes), maxAttributes)
	}
	for name, v := range m.Attributes {
		switch {
		case name == "" || v == "":
			return fmt.Errorf("attribute %q=%q: names and values must not be empty", name, v)
		case name == AttrEmitID:
			return fmt.Errorf("attribute %s is the emit id's, set by the lock", AttrEmitID)
		case len(name) > 256:
			return fmt.Errorf("attribute name of %d bytes, over 256", len(name))
		}
	}
	return nil
}

// checkBody refuses a body over MaxMessageBytes or not UTF-8.
func (m Message) checkBody() error {
	switch {
	case len(m.Body) > MaxMessageBytes:
		return fmt.Errorf("body of %d bytes, over MaxMessageBytes (%d)", len(m.Body), MaxMessageBytes)
	case !utf8.ValidString(m.Body):
		return errors.New("body is not UTF-8")
	}
	return nil
}

// EventBridge's limits on an entry's source and detail-type, in bytes
// (its own are 256 and 128 characters: bytes never count fewer).
const (
	maxEventSource     = 256
	maxEventDetailType = 128
)

// checkEvent refuses an "events:" message to bus that EventBridge would
// refuse, or that would lose what it carries: EventBridge has no message
// attributes and no message groups, and its detail is a JSON object.
func (m Message) checkEvent(bus string) error {
	if !validBus(bus) {
		return fmt.Errorf("destination %q: want \"events:\" and a bus name (1 to 256 of A-Z a-z 0-9 . _ / -) or ARN (arn:aws:events:<region>:<account>:event-bus/<name>)", m.To)
	}
	if m.GroupID != "" {
		return fmt.Errorf("destination %s is an event bus: GroupID %q is refused there (EventBridge has no message groups)", m.To, m.GroupID)
	}
	if err := m.checkBody(); err != nil {
		return err
	}
	var members map[string]json.RawMessage
	if body := strings.TrimSpace(m.Body); !strings.HasPrefix(body, "{") || json.Unmarshal([]byte(body), &members) != nil {
		return fmt.Errorf("destination %s is an event bus: the body must be a JSON object, the event's detail", m.To)
	}
	if _, taken := members[sqsmsg.EventDetailMember]; taken {
		return fmt.Errorf("the body's member %q is sqs-once's: it carries the event's emit id", sqsmsg.EventDetailMember)
	}
	for name, v := range m.Attributes {
		switch name {
		case AttrEventSource:
			switch {
			case v == "" || len(v) > maxEventSource:
				return fmt.Errorf("attribute %s of %d bytes: an event's source is 1 to %d", name, len(v), maxEventSource)
			case strings.HasPrefix(v, "aws."):
				return fmt.Errorf("attribute %s %q: EventBridge keeps the sources starting with \"aws.\" for AWS", name, v)
			}
		case AttrEventDetailType:
			if v == "" || len(v) > maxEventDetailType {
				return fmt.Errorf("attribute %s of %d bytes: an event's detail-type is 1 to %d", name, len(v), maxEventDetailType)
			}
		default:
			return fmt.Errorf("attribute %q on an event: EventBridge has no message attributes; set only %s and %s, and put the rest in the body", name, AttrEventSource, AttrEventDetailType)
		}
	}
	return nil
}

// validBus reports whether bus is a bus name or ARN in the forms the
// events target takes (targets.ToBus): a name of 1 to 256 of [A-Za-z0-9._/-],
// or arn:aws<partition>:events:<region>:<12 digits>:event-bus/<name>.
func validBus(bus string) bool {
	if !strings.HasPrefix(bus, "arn:") {
		return busName(bus)
	}
	f := strings.SplitN(bus, ":", 6)
	if len(f) != 6 || f[2] != "events" || !strings.HasPrefix(f[1], "aws") || len(f[4]) != 12 {
		return false
	}
	name, ok := strings.CutPrefix(f[5], "event-bus/")
	return ok && allBytes(f[1][3:], func(c byte) bool { return c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }) &&
		f[3] != "" && allBytes(f[3], func(c byte) bool { return c == '-' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }) &&
		allBytes(f[4], func(c byte) bool { return c >= '0' && c <= '9' }) && busName(name)
}

// busName reports whether s is 1 to 256 of [A-Za-z0-9._/-].
func busName(s string) bool {
	return len(s) >= 1 && len(s) <= 256 && allBytes(s, func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '/' || c == '-'
	})
}

// allBytes reports whether every byte of s is ok.
func allBytes(s string, ok func(byte) bool) bool {
	for i := range len(s) {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

// encodedSize is about what m adds to the encoded outbox.
func (m Message) encodedSize() int {
	n := 64 + len(m.To) + len(m.Body) + len(m.GroupID)
	for k, v := range m.Attributes {
		n += len(k) + len(v) + 8
	}
	return n
}

// encodeOutbox is the messages as the record keeps them (nil: none).
func encodeOutbox(msgs []Message) ([]byte, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	return json.Marshal(msgs)
}

// countOutbox is how many messages an encoded outbox holds (0 when it
// does not decode: relay has said so).
func countOutbox(b []byte) int {
	var msgs []json.RawMessage
	if json.Unmarshal(b, &msgs) != nil {
		return 0
	}
	return len(msgs)
}

// decodeOutbox reads a record's outbox.
func decodeOutbox(id string, b []byte) ([]Message, error) {
	var msgs []Message
	if err := json.Unmarshal(b, &msgs); err != nil {
		return nil, &store.RecordError{ID: id, Problem: fmt.Sprintf("its outbox does not decode: %v", err)}
	}
	return msgs, nil
}

// emitID is the stable id of the i-th message of the completion of record
// id with fence: the same on every send of it, another for every other
// message and completion.
func emitID(id string, fence int64, i int) string {
	h := sha256.New()
	h.Write([]byte(id))
	h.Write([]byte{0})
	h.Write([]byte(strconv.FormatInt(fence, 10)))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(i)))
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// outgoing is the messages of rec's completion as sent.
func outgoing(rec store.Record, msgs []Message) []Outgoing {
	out := make([]Outgoing, len(msgs))
	for i, m := range msgs {
		out[i] = Outgoing{Message: m, ID: emitID(rec.ID, rec.Fence, i)}
	}
	return out
}

// Pending returns the messages rec's completion has pending (its
// Record.Outbox, not yet marked sent), with their ids, as the lock sends
// them: for an operator's tool (sqs-once inspect). None when rec has no
// outbox.
func Pending(rec store.Record) ([]Outgoing, error) {
	if rec.Outbox == nil {
		return nil, nil
	}
	msgs, err := decodeOutbox(rec.ID, rec.Outbox)
	if err != nil {
		return nil, err
	}
	return outgoing(rec, msgs), nil
}

// SendPending sends rec's pending messages with sender and marks them
// sent in s, as the key's next delivery would: for an operator's tool
// (sqs-once send-pending) when no delivery is coming. It returns nil when
// rec has nothing pending, or once every message was accepted and the
// record marked; otherwise an error matching ErrEmitPending, the record
// left as it was. The messages keep their ids: a receiver that got one
// before drops the copy.
func SendPending(ctx context.Context, s store.Store, sender Sender, rec store.Record) error {
	if rec.Outbox == nil {
		return nil
	}
	if sender == nil {
		return fmt.Errorf("%w: record %q has messages pending and there is no Sender", ErrEmitPending, rec.ID)
	}
	out, err := Pending(rec)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrEmitPending, err)
	}
	errs := sender.Send(ctx, out)
	var failed []error
	for i, err := range errs {
		if err != nil && i < len(out) {
			failed = append(failed, fmt.Errorf("message %d to %s: %w", i+1, out[i].To, err))
		}
	}
	if len(errs) != len(out) {
		failed = append(failed, fmt.Errorf("the sender answered for %d of %d messages", len(errs), len(out)))
	}
	if len(failed) > 0 {
		return fmt.Errorf("%w: record %q: %w", ErrEmitPending, rec.ID, errors.Join(failed...))
	}
	if err := s.MarkSent(ctx, rec); err != nil {
		return fmt.Errorf("%w: record %q: its messages were sent, and marking them sent failed (a redelivery sends them again, with the same ids): %w", ErrEmitPending, rec.ID, err)
	}
	return nil
}

// relay sends the pending messages of rec (a COMPLETED record with an
// outbox) and marks them sent: SendPending with the Processor's store and
// Sender, the same for the holder that just committed and for a later
// delivery that finds the completion.
func (g *locker) relay(ctx context.Context, rec store.Record) error {
	if g.sender == nil {
		return fmt.Errorf("%w: record %q has messages pending and the Processor has no Config.Sender", ErrEmitPending, rec.ID)
	}
	return SendPending(ctx, g.store, g.sender, rec)
}
