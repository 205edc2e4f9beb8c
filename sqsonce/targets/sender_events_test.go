package targets_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store/memstore"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// The tests of this file need no AWS: the Sender's EventBridge client is a
// fake that records each PutEvents call and answers as EventBridge does.

// fakeEvents records PutEvents calls. A call is failed as a whole when
// callErr returns an error for it; an entry alone when entryCode returns a
// code for it, as EventBridge lists it (ErrorCode, FailedEntryCount).
type fakeEvents struct {
	mu        sync.Mutex
	calls     [][]ebtypes.PutEventsRequestEntry
	callErr   func(entries []ebtypes.PutEventsRequestEntry) error
	entryCode func(e ebtypes.PutEventsRequestEntry) string
}

func (f *fakeEvents) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	f.mu.Lock()
	f.calls = append(f.calls, append([]ebtypes.PutEventsRequestEntry(nil), in.Entries...))
	f.mu.Unlock()
	if f.callErr != nil {
		if err := f.callErr(in.Entries); err != nil {
			return nil, err
		}
	}
	out := &eventbridge.PutEventsOutput{}
	for i, e := range in.Entries {
		code := ""
		if f.entryCode != nil {
			code = f.entryCode(e)
		}
		if code != "" {
			out.FailedEntryCount++
			out.Entries = append(out.Entries, ebtypes.PutEventsResultEntry{ErrorCode: aws.String(code), ErrorMessage: aws.String("refused by the fake")})
			continue
		}
		out.Entries = append(out.Entries, ebtypes.PutEventsResultEntry{EventId: aws.String(fmt.Sprint("event-", i))})
	}
	return out, nil
}

// event is an emitted event to bus with the order's id in its body.
func event(bus string, order int, attrs map[string]string) sqsonce.Outgoing {
	return sqsonce.Outgoing{
		Message: sqsonce.Message{To: "events:" + bus, Body: fmt.Sprintf(`{"order":%d}`, order), Attributes: attrs},
		ID:      fmt.Sprintf("%032x", order),
	}
}

// detailOf decodes an entry's Detail.
func detailOf(t *testing.T, e ebtypes.PutEventsRequestEntry) (order int, emitID string) {
	t.Helper()
	var d struct {
		Order   int `json:"order"`
		SQSOnce struct {
			EmitID string `json:"emitId"`
		} `json:"sqsOnce"`
	}
	if err := json.Unmarshal([]byte(aws.ToString(e.Detail)), &d); err != nil {
		t.Fatalf("detail %s: %v", aws.ToString(e.Detail), err)
	}
	return d.Order, d.SQSOnce.EmitID
}

// TestSenderPutsEventsTenACallPerBus: a key's events go to their buses in
// PutEvents calls of at most ten entries, each call to one bus; every
// entry is its message's body with the emit id in its detail, with the
// source and detail-type of its attributes or the events target's
// defaults.
func TestSenderPutsEventsTenACallPerBus(t *testing.T) {
	t.Parallel()
	const billing = "arn:aws:events:us-east-1:123456789012:event-bus/billing"
	fake := &fakeEvents{}
	s := &targets.Sender{Events: fake}
	var msgs []sqsonce.Outgoing
	for i := range 27 {
		if i%7 == 3 {
			msgs = append(msgs, event(billing, i, nil))
			continue
		}
		msgs = append(msgs, event("orders", i, map[string]string{sqsonce.AttrEventSource: "shop.orders", sqsonce.AttrEventDetailType: "OrderAccepted"}))
	}
	for i, err := range s.Send(context.Background(), msgs) {
		if err != nil {
			t.Errorf("message %d: %v", i, err)
		}
	}
	put := map[int]int{}
	perBus := map[string]int{}
	for _, call := range fake.calls {
		if len(call) > 10 {
			t.Errorf("a PutEvents call of %d entries; EventBridge takes 10", len(call))
		}
		perBus[aws.ToString(call[0].EventBusName)]++
		for _, e := range call {
			if aws.ToString(e.EventBusName) != aws.ToString(call[0].EventBusName) {
				t.Errorf("a call to %s and %s; want one bus a call", aws.ToString(call[0].EventBusName), aws.ToString(e.EventBusName))
			}
			order, id := detailOf(t, e)
			put[order]++
			m := msgs[order]
			if id != m.ID {
				t.Errorf("order %d: emitId %q in the detail; want %q", order, id, m.ID)
			}
			if want := strings.TrimPrefix(m.To, "events:"); aws.ToString(e.EventBusName) != want {
				t.Errorf("order %d put on %s; want %s", order, aws.ToString(e.EventBusName), want)
			}
			source, detailType := targets.DefaultEventSource, targets.DefaultDetailType
			if m.Attributes != nil {
				source, detailType = "shop.orders", "OrderAccepted"
			}
			if aws.ToString(e.Source) != source || aws.ToString(e.DetailType) != detailType {
				t.Errorf("order %d: source %q detail-type %q; want %q %q", order, aws.ToString(e.Source), aws.ToString(e.DetailType), source, detailType)
			}
		}
	}
	for i := range msgs {
		if put[i] != 1 {
			t.Errorf("order %d put %d times; want once", i, put[i])
		}
	}
	// 23 events to orders: 10, 10, 3; 4 to billing: one call.
	if perBus["orders"] != 3 || perBus[billing] != 1 {
		t.Errorf("calls per bus %v; want 3 to orders and 1 to billing", perBus)
	}
}

// TestSenderReportsEachEventsFailure: an entry EventBridge fails alone
// (its ErrorCode) is that message's error, and only its; a call that
// fails as a whole is the error of every message of that call.
func TestSenderReportsEachEventsFailure(t *testing.T) {
	t.Parallel()
	fake := &fakeEvents{
		entryCode: func(e ebtypes.PutEventsRequestEntry) string {
			switch {
			case strings.Contains(aws.ToString(e.Detail), `"order":4,`):
				return "InvalidArgument"
			case strings.Contains(aws.ToString(e.Detail), `"order":13,`):
				return "ThrottlingException"
			}
			return ""
		},
		callErr: func(entries []ebtypes.PutEventsRequestEntry) error {
			if aws.ToString(entries[0].EventBusName) == "down" {
				return errors.New("connection reset")
			}
			return nil
		},
	}
	s := &targets.Sender{Events: fake}
	var msgs []sqsonce.Outgoing
	for i := range 15 {
		msgs = append(msgs, event("orders", i, nil))
	}
	msgs = append(msgs, event("down", 15, nil), event("down", 16, nil))
	errs := s.Send(context.Background(), msgs)
	if len(errs) != len(msgs) {
		t.Fatalf("%d errors for %d messages", len(errs), len(msgs))
	}
	for i, err := range errs {
		switch i {
		case 4:
			if !errors.Is(err, sqsonce.ErrTargetRefused) || !strings.Contains(fmt.Sprint(err), "InvalidArgument") {
				t.Errorf("message 4, failed alone (InvalidArgument): %v; want a refusal naming the code", err)
			}
		case 13:
			if err == nil || errors.Is(err, sqsonce.ErrTargetRefused) || !strings.Contains(err.Error(), "ThrottlingException") {
				t.Errorf("message 13, throttled alone: %v; want an error naming the code, not a refusal", err)
			}
		case 15, 16:
			if err == nil || !strings.Contains(err.Error(), "connection reset") {
				t.Errorf("message %d, its call failed: %v; want the call's error", i, err)
			}
		default:
			if err != nil {
				t.Errorf("message %d: %v; want nil: only its neighbours failed", i, err)
			}
		}
	}
}

// TestSenderWithoutEventsClientRefusesEvents: a Sender built without an
// EventBridge client refuses events, each with an error saying so.
func TestSenderWithoutEventsClientRefusesEvents(t *testing.T) {
	t.Parallel()
	s := &targets.Sender{}
	for i, err := range s.Send(context.Background(), []sqsonce.Outgoing{event("orders", 1, nil), event("orders", 2, nil)}) {
		if !errors.Is(err, sqsonce.ErrTargetRefused) || !strings.Contains(err.Error(), "EventBridge") {
			t.Errorf("message %d: %v; want a refusal naming EventBridge", i, err)
		}
	}
}

// emitThrough runs Emit(msg) in a lock of a Processor on the in-memory
// store whose Sender is s, and returns Emit's error and Do's.
func emitThrough(t *testing.T, s sqsonce.Sender, key string, msg sqsonce.Message) (emitErr, doErr error) {
	t.Helper()
	p, err := sqsonce.New(sqsonce.Config{Store: memstore.New(), KeyPrefix: "orders", Sender: s, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	doErr = p.Do(context.Background(), key, func(ctx context.Context) error {
		emitErr = sqsonce.Emit(ctx, msg)
		return emitErr
	})
	return emitErr, doErr
}

// TestLargestEmittedEventFitsEventBridge: the largest event Emit takes
// (a body of MaxMessageBytes, the longest source, detail-type and bus)
// is within EventBridge's entry size as the Sender counts it, so that no
// message Emit committed is refused for its size after the commit.
func TestLargestEmittedEventFitsEventBridge(t *testing.T) {
	t.Parallel()
	fake := &fakeEvents{}
	bus := "arn:aws-iso-b:events:us-isob-east-1:123456789012:event-bus/" + strings.Repeat("b", 256)
	body := `{"x":"` + strings.Repeat("x", sqsonce.MaxMessageBytes-8) + `"}`
	msg := sqsonce.Message{To: "events:" + bus, Body: body, Attributes: map[string]string{
		sqsonce.AttrEventSource:     strings.Repeat("s", 256),
		sqsonce.AttrEventDetailType: strings.Repeat("d", 128),
	}}
	emitErr, doErr := emitThrough(t, &targets.Sender{Events: fake}, "largest", msg)
	if emitErr != nil || doErr != nil {
		t.Fatalf("Emit: %v, Do: %v; want the largest event taken and sent", emitErr, doErr)
	}
	if len(fake.calls) != 1 || len(fake.calls[0]) != 1 {
		t.Fatalf("calls %d; want the event put once", len(fake.calls))
	}
	e := fake.calls[0][0]
	size := 14 + len(aws.ToString(e.Source)) + len(aws.ToString(e.DetailType)) + len(aws.ToString(e.Detail)) + len(aws.ToString(e.EventBusName))
	if size > targets.MaxEventsBytes {
		t.Errorf("the entry is %d bytes, over MaxEventsBytes (%d)", size, targets.MaxEventsBytes)
	}
}

// TestEmitTakesTheBusesOfTheEventsTarget: Emit takes an "events:" bus iff
// the events target takes it (targets.ToBus): one form of a bus for both.
func TestEmitTakesTheBusesOfTheEventsTarget(t *testing.T) {
	t.Parallel()
	for i, bus := range []string{
		"orders", "default", "a", strings.Repeat("b", 256), strings.Repeat("b", 257), "aws.partner/acme.com/1/orders", "my_bus-1.x",
		"", "my bus", "orders:x", "orders*", "bus\u00e9",
		"arn:aws:events:us-east-1:123456789012:event-bus/orders",
		"arn:aws-cn:events:cn-north-1:123456789012:event-bus/orders",
		"arn:aws-us-gov:events:us-gov-west-1:123456789012:event-bus/aws.partner/acme.com/1/orders",
		"arn:aws:events:us-east-1:123456789012:event-bus/",
		"arn:aws:events:us-east-1:12345678901:event-bus/orders",
		"arn:aws:events:us-east-1:1234567890123:event-bus/orders",
		"arn:aws:events::123456789012:event-bus/orders",
		"arn:aws:events:US-EAST-1:123456789012:event-bus/orders",
		"arn:aws:events:us-east-1:123456789012:rule/orders",
		"arn:aws:sns:us-east-1:123456789012:event-bus/orders",
		"arn:azure:events:us-east-1:123456789012:event-bus/orders",
		"arn:aws1:events:us-east-1:123456789012:event-bus/orders",
		"arn:aws:events:us-east-1:123456789012:event-bus/orders:x",
		"arn:aws:events:us-east-1:123456789012:event-bus/" + strings.Repeat("b", 257),
	} {
		_, targetErr := targets.ToBus(aws.Config{}, bus, "", "")
		emitErr, _ := emitThrough(t, &targets.Sender{Events: &fakeEvents{}}, fmt.Sprint("bus-", i), sqsonce.Message{To: "events:" + bus, Body: "{}"})
		if (targetErr == nil) != (emitErr == nil) {
			t.Errorf("bus %q: the events target says %v, Emit %v; want both to take it or both to refuse it", bus, targetErr, emitErr)
		}
	}
}
