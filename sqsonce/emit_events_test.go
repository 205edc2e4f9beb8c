package sqsonce_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

const bus = "events:orders"

// emitOne runs Emit(msg) in a lock of p and returns its error.
func emitOne(t *testing.T, p *sqsonce.Processor, key string, msg sqsonce.Message) error {
	t.Helper()
	var got error
	if err := p.Do(context.Background(), key, func(ctx context.Context) error {
		got = sqsonce.Emit(ctx, msg)
		return nil
	}); err != nil {
		t.Fatalf("Do %s: %v", key, err)
	}
	return got
}

// TestEmitEventIsSentAsStaged: an "events:" message, to a bus by name or
// by ARN, with its source and detail-type attributes, is committed and
// handed to the Sender as emitted, with its id.
func TestEmitEventIsSentAsStaged(t *testing.T) {
	t.Parallel()
	_, sender, p := emitBed(t)
	msgs := []sqsonce.Message{
		{To: bus, Body: `{"orderId":"A-1"}`, Attributes: map[string]string{sqsonce.AttrEventSource: "orders", sqsonce.AttrEventDetailType: "OrderAccepted"}},
		{To: "events:arn:aws:events:eu-west-1:123456789012:event-bus/orders", Body: " {} "},
		// A bus's name may end in .fifo: it is no FIFO queue, and takes no GroupID.
		{To: "events:orders.fifo", Body: `{"a":[1,2,{"b":null}]}`},
	}
	err := p.Do(context.Background(), "E-1", func(ctx context.Context) error { return sqsonce.Emit(ctx, msgs...) })
	if err != nil {
		t.Fatal(err)
	}
	if len(sender.sent) != len(msgs) {
		t.Fatalf("sent %d messages; want %d", len(sender.sent), len(msgs))
	}
	for i, m := range sender.sent {
		if m.To != msgs[i].To || m.Body != msgs[i].Body || len(m.Attributes) != len(msgs[i].Attributes) || len(m.ID) != 32 {
			t.Errorf("message %d sent as %+v; want %+v with its id", i, m, msgs[i])
		}
	}
}

// TestEmitRefusesWhatABusWouldRefuse: an event EventBridge would refuse,
// or that would lose what it carries, is refused at Emit, before anything
// is committed, with an error naming the limit.
func TestEmitRefusesWhatABusWouldRefuse(t *testing.T) {
	t.Parallel()
	_, sender, p := emitBed(t)
	attrs := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, c := range []struct {
		name string
		msg  sqsonce.Message
		want string
	}{
		{"no bus", sqsonce.Message{To: "events:", Body: "{}"}, "bus name"},
		{"a name with a space", sqsonce.Message{To: "events:my bus", Body: "{}"}, "bus name"},
		{"a name over 256", sqsonce.Message{To: "events:" + strings.Repeat("b", 257), Body: "{}"}, "bus name"},
		{"an ARN of another service", sqsonce.Message{To: "events:arn:aws:sns:us-east-1:123456789012:event-bus/orders", Body: "{}"}, "bus name"},
		{"an ARN without event-bus/", sqsonce.Message{To: "events:arn:aws:events:us-east-1:123456789012:rule/orders", Body: "{}"}, "bus name"},
		{"an ARN with a short account", sqsonce.Message{To: "events:arn:aws:events:us-east-1:1234:event-bus/orders", Body: "{}"}, "bus name"},
		{"a group", sqsonce.Message{To: bus, Body: "{}", GroupID: "g"}, "GroupID"},
		{"an empty body", sqsonce.Message{To: bus}, "JSON object"},
		{"a text body", sqsonce.Message{To: bus, Body: "OrderAccepted A-1"}, "JSON object"},
		{"an array body", sqsonce.Message{To: bus, Body: `[{"orderId":"A-1"}]`}, "JSON object"},
		{"a string body", sqsonce.Message{To: bus, Body: `"A-1"`}, "JSON object"},
		{"a broken object", sqsonce.Message{To: bus, Body: `{"orderId":`}, "JSON object"},
		{"the member of the emit id", sqsonce.Message{To: bus, Body: `{"sqsOnce":1}`}, targets.DetailMember},
		{"too large", sqsonce.Message{To: bus, Body: `{"x":"` + strings.Repeat("x", sqsonce.MaxMessageBytes) + `"}`}, "MaxMessageBytes"},
		{"another attribute", sqsonce.Message{To: bus, Body: "{}", Attributes: attrs("type", "OrderAccepted")}, "no message attributes"},
		{"the emit id's attribute", sqsonce.Message{To: bus, Body: "{}", Attributes: attrs(sqsonce.AttrEmitID, "mine")}, "no message attributes"},
		{"an AWS source", sqsonce.Message{To: bus, Body: "{}", Attributes: attrs(sqsonce.AttrEventSource, "aws.orders")}, `"aws."`},
		{"an empty source", sqsonce.Message{To: bus, Body: "{}", Attributes: attrs(sqsonce.AttrEventSource, "")}, "1 to 256"},
		{"a source over 256", sqsonce.Message{To: bus, Body: "{}", Attributes: attrs(sqsonce.AttrEventSource, strings.Repeat("s", 257))}, "1 to 256"},
		{"a detail-type over 128", sqsonce.Message{To: bus, Body: "{}", Attributes: attrs(sqsonce.AttrEventDetailType, strings.Repeat("é", 65))}, "1 to 128"},
	} {
		if got := emitOne(t, p, "refuse-"+c.name, c.msg); got == nil || !strings.Contains(got.Error(), c.want) {
			t.Errorf("%s: Emit returned %v; want an error saying %q", c.name, got, c.want)
		}
	}
	if len(sender.sent) != 0 || sender.calls != 0 {
		t.Errorf("%d messages sent in %d calls; want none: every message was refused", len(sender.sent), sender.calls)
	}
	// The limits themselves are taken.
	for i, m := range []sqsonce.Message{
		{To: bus, Body: "{}", Attributes: attrs(sqsonce.AttrEventSource, strings.Repeat("s", 256), sqsonce.AttrEventDetailType, strings.Repeat("d", 128))},
		{To: "events:" + strings.Repeat("b", 256), Body: `{"x":"` + strings.Repeat("x", sqsonce.MaxMessageBytes-8) + `"}`},
		{To: "events:arn:aws-us-gov:events:us-gov-west-1:123456789012:event-bus/aws.partner/acme.com/1/orders", Body: "{}"},
	} {
		if err := emitOne(t, p, fmt.Sprint("limits-", i), m); err != nil {
			t.Errorf("Emit to %.60s: %v; want it taken", m.To, err)
		}
	}
}
