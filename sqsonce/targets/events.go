package targets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/sqs-once/sqs-once/internal/retrybudget"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/sqsonce"
)

// EventsAPI is the one EventBridge call an events target makes.
type EventsAPI interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

var _ EventsAPI = (*eventbridge.Client)(nil)

// EventBridge limits: at most 10 entries and 256 KiB per PutEvents, an
// entry's size counted as the EventBridge guide does (Source, DetailType,
// Detail, the bus name and 14 bytes for the time).
const (
	MaxEventsBytes        = 256 << 10
	maxEventsBatchEntries = 10
)

// DetailMember is the member of an event's Detail that carries the key and
// fence: {"key": "...", "fence": 1700000000001}; on an event the Sender
// puts, the emit id: {"emitId": "..."}.
const DetailMember = sqsmsg.EventDetailMember

// EventsTarget puts each message on an event bus with PutEvents. A body
// that is a JSON object is the Detail, with DetailMember added; any other
// body, or an object that already has DetailMember, is wrapped:
// {"body": "<the body as a string>", "sqsOnce": {...}}.
type EventsTarget struct {
	API EventsAPI
	// Bus is a bus name or ARN.
	Bus string
	// Source and DetailType of every entry; empty: DefaultEventSource and
	// DefaultDetailType.
	Source     string
	DetailType string
}

// Deliver puts the messages, ten calls at once. EventBridge keeps no order,
// so a FIFO source's order is not kept beyond the bus.
func (t *EventsTarget) Deliver(ctx context.Context, msgs []sqsonce.Delivery) []error {
	entries := make([]ebtypes.PutEventsRequestEntry, len(msgs))
	sizes := make([]int, len(msgs))
	for i, m := range msgs {
		entries[i], sizes[i] = t.entryFor(m)
	}
	return t.putAll(ctx, entries, sizes)
}

// putAll puts entries (sizes[i] is entry i's as EventBridge counts it), at
// most ten and MaxEventsBytes a call, ten calls at once, and returns each
// entry's error: refused when it is over MaxEventsBytes, the call's error
// when its call failed, its own when EventBridge failed it alone.
func (t *EventsTarget) putAll(ctx context.Context, entries []ebtypes.PutEventsRequestEntry, sizes []int) []error {
	errs := make([]error, len(entries))
	for i, size := range sizes {
		if size > MaxEventsBytes {
			errs[i] = refused(fmt.Errorf("targets: an event of %d bytes, over EventBridge's %d", size, MaxEventsBytes))
		}
	}
	batches := pack(errs, func(i int) int { return sizes[i] }, maxEventsBatchEntries, MaxEventsBytes)
	sendAll(batches, nil, func(batch []int) { t.put(ctx, entries, batch, errs) })
	return errs
}

func (t *EventsTarget) put(ctx context.Context, entries []ebtypes.PutEventsRequestEntry, batch []int, errs []error) {
	if err := ctx.Err(); err != nil {
		for _, i := range batch {
			errs[i] = fmt.Errorf("targets: not sent: %w", err)
		}
		return
	}
	in := &eventbridge.PutEventsInput{}
	for _, i := range batch {
		in.Entries = append(in.Entries, entries[i])
	}
	out, err := t.API.PutEvents(ctx, in, func(o *eventbridge.Options) { o.Retryer = retrybudget.Within(ctx, o.Retryer) })
	if err != nil {
		err = callError(fmt.Errorf("targets: PutEvents to %s: %w", t.Bus, err), false)
		for _, i := range batch {
			errs[i] = err
		}
		return
	}
	// The result entries are in the request's order.
	for n, i := range batch {
		if n >= len(out.Entries) {
			errs[i] = unknown(errors.New("targets: EventBridge returned no result for the entry"))
			continue
		}
		r := out.Entries[n]
		if r.ErrorCode == nil && r.EventId != nil {
			continue
		}
		code := aws.ToString(r.ErrorCode)
		err := fmt.Errorf("targets: EventBridge refused the event: %s: %s", code, aws.ToString(r.ErrorMessage))
		if code != "" && !strings.Contains(code, "Internal") && !strings.Contains(code, "Throttl") {
			err = refused(err)
		}
		errs[i] = err
	}
}

// entryFor is m as a PutEvents entry, with its size as EventBridge counts it.
func (t *EventsTarget) entryFor(m sqsonce.Delivery) (ebtypes.PutEventsRequestEntry, int) {
	return eventEntry(t.Bus, t.Source, t.DetailType, Detail(m))
}

// eventEntry is the PutEvents entry of detail on bus, with source and
// detailType ("": DefaultEventSource and DefaultDetailType), and its size
// as EventBridge counts it (the bus counted too, to be safe).
func eventEntry(bus, source, detailType, detail string) (ebtypes.PutEventsRequestEntry, int) {
	if source == "" {
		source = DefaultEventSource
	}
	if detailType == "" {
		detailType = DefaultDetailType
	}
	return ebtypes.PutEventsRequestEntry{
		EventBusName: aws.String(bus),
		Source:       aws.String(source),
		DetailType:   aws.String(detailType),
		Detail:       aws.String(detail),
	}, 14 + len(source) + len(detailType) + len(detail) + len(bus)
}

// Detail is the event Detail an events target puts for m.
func Detail(m sqsonce.Delivery) string {
	meta, _ := json.Marshal(struct {
		Key   string `json:"key"`
		Fence int64  `json:"fence"`
	}{m.Key, m.Fence})
	return detailWith(m.Record.Body, meta)
}

// emitDetail is the event Detail the Sender puts for m: its body, a JSON
// object (Emit refuses any other), with DetailMember {"emitId": m.ID}.
func emitDetail(m sqsonce.Outgoing) string {
	meta, _ := json.Marshal(struct {
		EmitID string `json:"emitId"`
	}{m.ID})
	return detailWith(m.Body, meta)
}

// detailWith is body as an event Detail carrying meta as DetailMember: a
// body that is a JSON object without DetailMember, with the member added;
// any other body wrapped, {"body": "<the body as a string>", DetailMember:
// meta}.
func detailWith(body string, meta json.RawMessage) string {
	b := bytes.TrimSpace([]byte(body))
	var members map[string]json.RawMessage
	if len(b) > 0 && b[0] == '{' && json.Unmarshal(b, &members) == nil {
		if _, taken := members[DetailMember]; !taken {
			inner := bytes.TrimSpace(b[1 : len(b)-1])
			sep := ","
			if len(inner) == 0 {
				sep = ""
			}
			return string(b[:len(b)-1]) + sep + `"` + DetailMember + `":` + string(meta) + "}"
		}
	}
	wrapped, _ := json.Marshal(map[string]any{"body": body, DetailMember: meta})
	return string(wrapped)
}
