package sqsonce_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
	"github.com/sqs-once/sqs-once/sqsonce/store/memstore"
)

// fakeSender records what it was asked to send, and fails while failing.
type fakeSender struct {
	mu      sync.Mutex
	sent    []sqsonce.Outgoing
	calls   int
	failing error
}

func (f *fakeSender) Send(_ context.Context, msgs []sqsonce.Outgoing) []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if f.failing != nil {
			errs[i] = f.failing
			continue
		}
		f.sent = append(f.sent, m)
	}
	return errs
}

func (f *fakeSender) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failing = err
}

func (f *fakeSender) ids() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for _, m := range f.sent {
		ids = append(ids, m.ID)
	}
	return ids
}

const queue = "sqs:https://sqs.us-east-1.amazonaws.com/123456789012/shipments"

func shipped(order string) sqsonce.Message {
	return sqsonce.Message{To: queue, Body: `{"order":"` + order + `"}`, Attributes: map[string]string{"type": "OrderAccepted"}}
}

func emitBed(t *testing.T) (*memstore.Store, *fakeSender, *sqsonce.Processor) {
	t.Helper()
	mem := memstore.New()
	sender := &fakeSender{}
	return mem, sender, newDo(t, mem, "orders", func(c *sqsonce.Config) {
		c.Sender = sender
		c.Test.Now = mem.Now
	})
}

// TestEmitSendsAfterTheCommit: a work's emitted messages are committed
// with its completion and sent after it, each with a stable id; the
// record is then marked sent, and a duplicate sends nothing more.
func TestEmitSendsAfterTheCommit(t *testing.T) {
	t.Parallel()
	mem, sender, p := emitBed(t)
	ctx := context.Background()
	err := p.Do(ctx, "A-1", func(ctx context.Context) error {
		return sqsonce.Emit(ctx, shipped("A-1"), shipped("A-1b"))
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := sender.ids()
	if len(ids) != 2 || ids[0] == ids[1] || len(ids[0]) != 32 {
		t.Fatalf("sent ids %v; want two distinct stable ids", ids)
	}
	if sender.sent[0].Body != `{"order":"A-1"}` || sender.sent[0].Attributes["type"] != "OrderAccepted" {
		t.Errorf("sent %+v; want the message as emitted", sender.sent[0])
	}
	rec, err := mem.Read(ctx, store.RecordID("orders", "A-1"))
	if err != nil || rec.Status != store.StatusCompleted || rec.Outbox != nil {
		t.Errorf("record %v, outbox %q (%v); want COMPLETED and marked sent", rec, rec.Outbox, err)
	}
	if err := p.Do(ctx, "A-1", func(context.Context) error { t.Error("a duplicate ran"); return nil }); !errors.Is(err, sqsonce.ErrDuplicate) {
		t.Errorf("a duplicate returned %v", err)
	}
	if sender.calls != 1 {
		t.Errorf("%d sends; want 1: a duplicate whose messages were sent sends nothing", sender.calls)
	}
}

// TestEmitPendingIsRelayedByTheNextCall: a send that fails leaves the
// record completed with its messages pending and Do's error
// ErrEmitPending; the next call sends them, with the same ids, without
// running the work, and answers ErrDuplicate.
func TestEmitPendingIsRelayedByTheNextCall(t *testing.T) {
	t.Parallel()
	mem, sender, p := emitBed(t)
	ctx := context.Background()
	sender.fail(errors.New("throttled"))
	runs := 0
	work := func(ctx context.Context) error {
		runs++
		return sqsonce.Emit(ctx, shipped("A-2"))
	}
	if err := p.Do(ctx, "A-2", work); !errors.Is(err, sqsonce.ErrEmitPending) {
		t.Fatalf("Do with the send failing returned %v; want ErrEmitPending", err)
	}
	rec, err := mem.Read(ctx, store.RecordID("orders", "A-2"))
	if err != nil || rec.Status != store.StatusCompleted || rec.Outbox == nil {
		t.Fatalf("record %v (%v); want COMPLETED with its messages pending", rec, err)
	}
	if err := p.Do(ctx, "A-2", work); !errors.Is(err, sqsonce.ErrEmitPending) {
		t.Errorf("the next call, the send still failing: %v; want ErrEmitPending again", err)
	}
	sender.fail(nil)
	if err := p.Do(ctx, "A-2", work); !errors.Is(err, sqsonce.ErrDuplicate) {
		t.Fatalf("the next call, the send working: %v; want ErrDuplicate once the pending messages are sent", err)
	}
	if runs != 1 {
		t.Errorf("the work ran %d times; want once: the redelivery relays, it does not run the work", runs)
	}
	first := sender.ids()
	if len(first) != 1 {
		t.Fatalf("sent %v; want the one message", first)
	}
	rec, _ = mem.Read(ctx, store.RecordID("orders", "A-2"))
	if rec.Outbox != nil {
		t.Errorf("outbox %q after the relay; want marked sent", rec.Outbox)
	}
	if err := p.Do(ctx, "A-2", work); !errors.Is(err, sqsonce.ErrDuplicate) || len(sender.ids()) != 1 {
		t.Errorf("a later call: %v, sent %v; want ErrDuplicate and nothing sent again", err, sender.ids())
	}
}

// TestEmitIDIsStable: the message's id is the same on every send of it:
// a relay sends what the holder's send sent, with the same id.
func TestEmitIDIsStable(t *testing.T) {
	t.Parallel()
	mem, sender, p := emitBed(t)
	ctx := context.Background()
	// The holder's send is accepted but the mark fails: the relay sends it
	// again.
	bad := &markFails{Store: mem}
	p2 := newDo(t, bad, "orders", func(c *sqsonce.Config) { c.Sender = sender; c.Test.Now = mem.Now })
	if err := p2.Do(ctx, "A-3", func(ctx context.Context) error { return sqsonce.Emit(ctx, shipped("A-3")) }); !errors.Is(err, sqsonce.ErrEmitPending) {
		t.Fatalf("Do with MarkSent failing: %v; want ErrEmitPending", err)
	}
	if err := p.Do(ctx, "A-3", func(context.Context) error { return nil }); !errors.Is(err, sqsonce.ErrDuplicate) {
		t.Fatalf("the relay: %v", err)
	}
	if ids := sender.ids(); len(ids) != 2 || ids[0] != ids[1] {
		t.Errorf("sent ids %v; want the same id twice (a receiver drops the repeat by it)", ids)
	}
}

type markFails struct{ store.Store }

func (markFails) MarkSent(context.Context, store.Record) error { return errors.New("throttled") }

// TestEmitNothingWithoutSuccess: a work that emits and then fails, or
// panics, commits no message and none is sent; the key runs again.
func TestEmitNothingWithoutSuccess(t *testing.T) {
	t.Parallel()
	mem, sender, p := emitBed(t)
	ctx := context.Background()
	err := p.Do(ctx, "A-4", func(ctx context.Context) error {
		if err := sqsonce.Emit(ctx, shipped("A-4")); err != nil {
			return err
		}
		return errors.New("a later step failed")
	})
	if err == nil {
		t.Fatal("Do succeeded")
	}
	func() {
		defer func() { _ = recover() }()
		_ = p.Do(ctx, "A-4p", func(ctx context.Context) error {
			_ = sqsonce.Emit(ctx, shipped("A-4p"))
			panic("boom")
		})
	}()
	if sender.calls != 0 {
		t.Errorf("%d sends; want none", sender.calls)
	}
	for _, k := range []string{"A-4", "A-4p"} {
		if rec, err := mem.Read(ctx, store.RecordID("orders", k)); err != nil || rec.Status != store.StatusReleased || rec.Outbox != nil {
			t.Errorf("record %s: %v, outbox %q (%v); want RELEASED, no outbox", k, rec, rec.Outbox, err)
		}
	}
}

// TestEmitWithTransactionalWrites: on a transactional store the messages
// commit in the same transaction as the work's writes.
func TestEmitWithTransactionalWrites(t *testing.T) {
	t.Parallel()
	mem, sender, p := emitBed(t)
	ctx := context.Background()
	err := p.Do(ctx, "A-5", func(ctx context.Context) error {
		if err := dynamostore.Add(ctx, orderPut("A-5")); err != nil {
			return err
		}
		return sqsonce.Emit(ctx, shipped("A-5"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(mem.Committed()[store.RecordID("orders", "A-5")]) != 1 || len(sender.ids()) != 1 {
		t.Errorf("committed %v, sent %v; want the write committed and the message sent", mem.Committed(), sender.ids())
	}
}

// TestEmitRefuses: what no destination would take is refused when it is
// emitted, and so is an Emit outside a lock, without a Sender, or after
// the work returned.
func TestEmitRefuses(t *testing.T) {
	t.Parallel()
	_, _, p := emitBed(t)
	ctx := context.Background()
	fifo := "sqs:https://sqs.us-east-1.amazonaws.com/123456789012/shipments.fifo"
	for _, c := range []struct {
		name string
		msg  sqsonce.Message
		want string
	}{
		{"no destination", sqsonce.Message{Body: "x"}, "destination"},
		{"a bare queue name", sqsonce.Message{To: "sqs:shipments", Body: "x"}, "queue URL"},
		{"fifo without group", sqsonce.Message{To: fifo, Body: "x"}, "GroupID"},
		{"group on a standard queue", sqsonce.Message{To: queue, Body: "x", GroupID: "g"}, "not FIFO"},
		{"empty body", sqsonce.Message{To: queue}, "empty body"},
		{"too large", sqsonce.Message{To: queue, Body: strings.Repeat("x", sqsonce.MaxMessageBytes+1)}, "MaxMessageBytes"},
		{"the emit id's attribute", sqsonce.Message{To: queue, Body: "x", Attributes: map[string]string{sqsonce.AttrEmitID: "mine"}}, sqsonce.AttrEmitID},
	} {
		var got error
		_ = p.Do(ctx, "refuse-"+c.name, func(ctx context.Context) error {
			got = sqsonce.Emit(ctx, c.msg)
			return nil
		})
		if got == nil || !strings.Contains(got.Error(), c.want) {
			t.Errorf("%s: Emit returned %v; want an error saying %q", c.name, got, c.want)
		}
	}
	if err := sqsonce.Emit(ctx, shipped("x")); err == nil {
		t.Error("Emit outside a lock succeeded")
	}
	noSender := newDo(t, memstore.New(), "orders")
	var got error
	_ = noSender.Do(ctx, "k", func(ctx context.Context) error { got = sqsonce.Emit(ctx, shipped("x")); return nil })
	if got == nil || !strings.Contains(got.Error(), "Sender") {
		t.Errorf("Emit on a Processor without Config.Sender: %v; want an error naming it", got)
	}
	var late chan error = make(chan error, 1)
	returned := make(chan struct{})
	_ = p.Do(ctx, "late", func(ctx context.Context) error {
		go func() { <-returned; late <- sqsonce.Emit(ctx, shipped("late")) }()
		return nil
	})
	close(returned)
	if err := <-late; !errors.Is(err, store.ErrTxEnded) {
		t.Errorf("Emit after the work returned: %v; want store.ErrTxEnded", err)
	}
}
