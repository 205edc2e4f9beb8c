package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/memstore"
)

// The hermetic tests of inspect's pending messages and of send-pending:
// the record is the library's own (a Do whose Emit could not be sent, on
// the memory store), the sender a fake.

const (
	shipments = "sqs:https://sqs.us-east-1.amazonaws.com/123456789012/shipments"
	audit     = "sns:arn:aws:sns:us-east-1:123456789012:audit.fifo"
)

// fakeSender answers every message with fail(i), nil when accepted, and
// keeps what it was asked to send.
type fakeSender struct {
	mu   sync.Mutex
	fail func(i int) error
	sent []sqsonce.Outgoing
}

func (f *fakeSender) Send(_ context.Context, msgs []sqsonce.Outgoing) []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if f.fail != nil {
			errs[i] = f.fail(i)
		}
		if errs[i] == nil {
			f.sent = append(f.sent, m)
		}
	}
	return errs
}

func refuseAll(int) error { return errors.New("throttled") }

// pendingBed is a memory store where key order-42 completed with two
// messages pending (its send refused), and the CLI on it.
type pendingBed struct {
	t    *testing.T
	mem  *memstore.Store
	recs *Records
	key  string
	out  bytes.Buffer
	err  bytes.Buffer
}

func newPendingBed(t *testing.T, msgs ...sqsonce.Message) *pendingBed {
	t.Helper()
	mem := memstore.New()
	p, err := sqsonce.New(sqsonce.Config{
		Store: mem, KeyPrefix: "orders", Sender: &fakeSender{fail: refuseAll},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Test: sqsonce.TestConfig{Now: mem.Now},
	})
	if err != nil {
		t.Fatal(err)
	}
	b := &pendingBed{t: t, mem: mem, key: "order-42", recs: &Records{Store: mem, Where: "memory store", Prefix: "orders", Now: mem.Now}}
	if len(msgs) > 0 {
		err = p.Do(context.Background(), b.key, func(ctx context.Context) error { return sqsonce.Emit(ctx, msgs...) })
		if !errors.Is(err, sqsonce.ErrEmitPending) {
			t.Fatalf("Do with the send refused: %v, want ErrEmitPending", err)
		}
	} else if err = p.Do(context.Background(), b.key, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	return b
}

// cli is the command line on the bed's streams, answering stdin.
func (b *pendingBed) cli(stdin string, json bool) *cli {
	b.out.Reset()
	b.err.Reset()
	return &cli{io: IO{Stdin: strings.NewReader(stdin), Stdout: &b.out, Stderr: &b.err, Now: b.mem.Now}, json: json}
}

// stored is the key's record as the store has it.
func (b *pendingBed) stored() store.Record {
	b.t.Helper()
	rec, err := b.mem.Read(context.Background(), store.RecordID("orders", b.key))
	if err != nil {
		b.t.Fatal(err)
	}
	return rec
}

// ids are the emit ids the library gives the key's pending messages.
func (b *pendingBed) ids() []string {
	b.t.Helper()
	out, err := sqsonce.Pending(b.stored())
	if err != nil {
		b.t.Fatal(err)
	}
	var ids []string
	for _, m := range out {
		ids = append(ids, m.ID)
	}
	return ids
}

func twoMessages() []sqsonce.Message {
	return []sqsonce.Message{
		{To: shipments, Body: `{"order":"42"}`, Attributes: map[string]string{"type": "OrderAccepted"}},
		{To: audit, GroupID: "tenant-7", Body: "line one\nline two \x1b[31mred\x1b[0m " + strings.Repeat("é", 80)},
	}
}

func TestInspectShowsPendingMessages(t *testing.T) {
	t.Parallel()
	b := newPendingBed(t, twoMessages()...)
	ids := b.ids()
	ctx := context.Background()
	if err := b.cli("", false).inspect(ctx, b.recs, b.key); err != nil {
		t.Fatal(err)
	}
	got := b.out.String()
	t.Logf("inspect:\n%s", got)
	for _, want := range []string{
		"status       COMPLETED, messages pending: the handler succeeded and its completion is committed; the messages it emitted are not sent yet (below)\n",
		"pending      2 messages not yet sent: the next delivery of the key sends them (and is then deleted as a duplicate), or sqs-once send-pending order-42 sends them now\n",
		"  #1         to " + shipments + ", emit id " + ids[0] + `, 14 bytes "{\"order\":\"42\"}", 1 attribute` + "\n",
		// Escaped, cut at 60 characters, and the group shown.
		"  #2         to " + audit + ", emit id " + ids[1] + `, group tenant-7, 191 bytes "line one\nline two \x1b[31mred\x1b[0m ` + strings.Repeat("é", 60-31) + `"..., 0 attributes` + "\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("inspect does not say\n%q", want)
		}
	}
	if strings.Contains(got, "\x1b") {
		t.Error("inspect wrote the body's escape character as it is")
	}

	// --json gives the messages whole.
	if err := b.cli("", true).inspect(ctx, b.recs, b.key); err != nil {
		t.Fatal(err)
	}
	var rec Record
	if err := json.Unmarshal(b.out.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	msgs := twoMessages()
	if len(rec.Pending) != 2 {
		t.Fatalf("inspect --json: %d pending, want 2:\n%s", len(rec.Pending), b.out.String())
	}
	for i, m := range rec.Pending {
		if m.Position != i+1 || m.To != msgs[i].To || m.EmitID != ids[i] || m.GroupID != msgs[i].GroupID || m.Body != msgs[i].Body || m.BodyBytes != len(msgs[i].Body) || len(m.Attributes) != len(msgs[i].Attributes) {
			t.Errorf("inspect --json message %d = %+v, want %+v with id %s", i+1, m, msgs[i], ids[i])
		}
	}
	if rec.Pending[0].Attributes["type"] != "OrderAccepted" {
		t.Errorf("attributes %v", rec.Pending[0].Attributes)
	}

	// The window ended: the next delivery runs the handler again instead.
	ended := *b.recs
	ended.Now = func() time.Time { return b.mem.Now().Add(25 * time.Hour) }
	if err := b.cli("", false).inspect(ctx, &ended, b.key); err != nil {
		t.Fatal(err)
	}
	if got := b.out.String(); !strings.Contains(got, "COMPLETED, window ended, messages pending") || !strings.Contains(got, "2 messages never sent, and the window has ended: the next delivery of the key runs the handler again and drops them") {
		t.Errorf("inspect after the window:\n%s", got)
	}
}

// A completed key without messages says nothing of them.
func TestInspectWithoutPendingMessages(t *testing.T) {
	t.Parallel()
	b := newPendingBed(t)
	ctx := context.Background()
	if err := b.cli("", false).inspect(ctx, b.recs, b.key); err != nil {
		t.Fatal(err)
	}
	if got := b.out.String(); strings.Contains(got, "pending") || !strings.Contains(got, "COMPLETED: the handler succeeded; a message with this key is deleted as a duplicate") {
		t.Errorf("inspect of a key without messages:\n%s", got)
	}
	if err := b.cli("", true).inspect(ctx, b.recs, b.key); err != nil {
		t.Fatal(err)
	}
	if got := b.out.String(); strings.Contains(got, "pending") {
		t.Errorf("inspect --json of a key without messages:\n%s", got)
	}
}

// An outbox that does not decode is shown as such, and nothing is sent.
func TestInspectUnreadableOutbox(t *testing.T) {
	t.Parallel()
	b := newPendingBed(t)
	rec := b.stored()
	rec.Outbox = []byte("not json")
	b.mem.Put(rec)
	if err := b.cli("", false).inspect(context.Background(), b.recs, b.key); err != nil {
		t.Fatal(err)
	}
	if got := b.out.String(); !strings.Contains(got, "messages not yet sent, unreadable:") || !strings.Contains(got, "its outbox does not decode") {
		t.Errorf("inspect of an unreadable outbox:\n%s", got)
	}
	sender := &fakeSender{}
	err := b.cli("", false).sendPending(context.Background(), b.recs, b.key, true, sender)
	if err == nil || ExitCode(err) != ExitError || len(sender.sent) != 0 || !strings.Contains(err.Error(), "nothing was sent") {
		t.Errorf("send-pending of an unreadable outbox: %v (exit %d), sent %d", err, ExitCode(err), len(sender.sent))
	}
}

func TestSendPending(t *testing.T) {
	t.Parallel()
	b := newPendingBed(t, twoMessages()...)
	ids := b.ids()
	ctx := context.Background()

	// Asked first: no answer, or no, sends nothing.
	for _, answer := range []string{"", "n\n"} {
		sender := &fakeSender{}
		err := b.cli(answer, false).sendPending(ctx, b.recs, b.key, false, sender)
		if !errors.Is(err, ErrDeclined) || ExitCode(err) != ExitRefused || len(sender.sent) != 0 {
			t.Errorf("answered %q: %v, sent %d; want declined, nothing sent", answer, err, len(sender.sent))
		}
		if !strings.Contains(b.out.String(), "pending      2 messages not yet sent") || !strings.Contains(b.err.String(), "Send the 2 messages pending for \"order-42\" now?") {
			t.Errorf("answered %q: the messages or the question not shown:\n%s\n%s", answer, b.out.String(), b.err.String())
		}
	}

	// One refused: exit 5, the record keeps both pending.
	sender := &fakeSender{fail: func(i int) error {
		if i == 1 {
			return errors.New("AuthorizationError: not allowed to publish")
		}
		return nil
	}}
	err := b.cli("y\n", false).sendPending(ctx, b.recs, b.key, false, sender)
	t.Logf("one refused: %v\n%s", err, b.out.String())
	if !errors.Is(err, ErrIncomplete) || ExitCode(err) != ExitIncomplete || !errors.Is(err, sqsonce.ErrEmitPending) {
		t.Errorf("one of two refused: %v (exit %d), want ErrIncomplete", err, ExitCode(err))
	}
	for _, want := range []string{
		"1 of 2 messages of key \"order-42\" (record orders#order-42, fence ",
		"#1  sent      to " + shipments + ", emit id " + ids[0] + "\n",
		"#2  NOT SENT  to " + audit + ", emit id " + ids[1] + ": AuthorizationError: not allowed to publish\n",
	} {
		if !strings.Contains(b.out.String(), want) {
			t.Errorf("send-pending with one refused does not say %q", want)
		}
	}
	if b.stored().Outbox == nil {
		t.Fatal("the record was marked sent though a message was refused")
	}

	// Both accepted, with the ids inspect shows; the record marked sent.
	sender = &fakeSender{}
	if err := b.cli("", false).sendPending(ctx, b.recs, b.key, true, sender); err != nil {
		t.Fatalf("send-pending --yes: %v", err)
	}
	t.Logf("sent:\n%s", b.out.String())
	if len(sender.sent) != 2 || sender.sent[0].ID != ids[0] || sender.sent[1].ID != ids[1] || sender.sent[1].GroupID != "tenant-7" {
		t.Errorf("sent %+v, want the two messages with ids %v", sender.sent, ids)
	}
	if !strings.Contains(b.out.String(), "sent 2 messages of key \"order-42\" (record orders#order-42, fence ") || !strings.Contains(b.out.String(), "and marked them sent: nothing is pending") {
		t.Errorf("send-pending says:\n%s", b.out.String())
	}
	if rec := b.stored(); rec.Outbox != nil || rec.Status != store.StatusCompleted {
		t.Errorf("after send-pending: %v, outbox %q; want COMPLETED, nothing pending", rec, rec.Outbox)
	}

	// Nothing pending any more: nothing to do, exit 0.
	sender = &fakeSender{}
	if err := b.cli("", false).sendPending(ctx, b.recs, b.key, false, sender); err != nil || len(sender.sent) != 0 || !strings.Contains(b.out.String(), "is COMPLETED with no messages pending: nothing to send") {
		t.Errorf("send-pending with nothing pending: %v, sent %d:\n%s", err, len(sender.sent), b.out.String())
	}
	if strings.Contains(b.err.String(), "[y/N]") {
		t.Error("send-pending asked with nothing to send")
	}
	// Not COMPLETED: refused; no record: not found.
	if _, err := b.mem.Acquire(ctx, store.AcquireRequest{ID: store.RecordID("orders", "held"), Owner: "o", Now: b.mem.Now(), LockUntil: b.mem.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := b.cli("y\n", false).sendPending(ctx, b.recs, "held", false, &fakeSender{}); ExitCode(err) != ExitRefused || !strings.Contains(err.Error(), "is PROCESSING, not COMPLETED") {
		t.Errorf("send-pending of a PROCESSING key: %v", err)
	}
	if err := b.cli("y\n", false).sendPending(ctx, b.recs, "never", false, &fakeSender{}); ExitCode(err) != ExitNotFound {
		t.Errorf("send-pending of a key without a record: %v", err)
	}
}

func TestSendPendingJSON(t *testing.T) {
	t.Parallel()
	b := newPendingBed(t, twoMessages()...)
	ids := b.ids()
	if err := b.cli("", true).sendPending(context.Background(), b.recs, b.key, true, &fakeSender{}); err != nil {
		t.Fatal(err)
	}
	var res SendResult
	if err := json.Unmarshal(b.out.Bytes(), &res); err != nil {
		t.Fatalf("%v:\n%s", err, b.out.String())
	}
	if !res.Marked || len(res.Messages) != 2 || !res.Messages[0].Sent || res.Messages[1].EmitID != ids[1] || len(res.Record.Pending) != 2 || res.Record.Pending[1].Body != twoMessages()[1].Body {
		t.Errorf("send-pending --json = %+v", res)
	}
}

// Messages a delivery sent while the question was asked are not sent
// again; a record completed anew meanwhile is refused, nothing sent.
func TestSendPendingReadsAgainAfterTheAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newPendingBed(t, twoMessages()...)
	sender := &fakeSender{}
	res, err := b.recs.SendPending(ctx, b.key, sender, func(Record) (bool, error) {
		if err := sqsonce.SendPending(ctx, b.mem, &fakeSender{}, b.stored()); err != nil {
			t.Fatal(err)
		}
		return true, nil
	})
	if err != nil || !res.SentMeanwhile || len(sender.sent) != 0 {
		t.Errorf("messages sent meanwhile: %+v, %v, sent %d again", res, err, len(sender.sent))
	}

	b = newPendingBed(t, twoMessages()...)
	sender = &fakeSender{}
	_, err = b.recs.SendPending(ctx, b.key, sender, func(r Record) (bool, error) {
		// Forgotten, and completed anew by a redelivery.
		if err := b.mem.Forget(ctx, r.stored); err != nil {
			t.Fatal(err)
		}
		lease, err := b.mem.Acquire(ctx, store.AcquireRequest{ID: r.RecordID, Owner: "again", Now: b.mem.Now(), LockUntil: b.mem.Now().Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.mem.Complete(ctx, lease, store.Completion{Until: b.mem.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		return true, nil
	})
	if !errors.Is(err, ErrChanged) || len(sender.sent) != 0 {
		t.Errorf("record completed anew meanwhile: %v, sent %d", err, len(sender.sent))
	}
}

// send-pending sends with SQS and SNS: without a region it is bad usage,
// whatever the store.
func TestSendPendingNeedsARegion(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := Main(context.Background(), []string{"send-pending", "--store", "redis", "--redis-url", "redis://127.0.0.1:1", "--key-prefix", "p", "--yes", "k"}, IO{
		Stdout: &out, Stderr: &errOut,
		LoadConfig: func(context.Context, string, string) (aws.Config, error) { return aws.Config{}, nil },
	})
	if code != ExitUsage || !strings.Contains(errOut.String(), "need an AWS region") {
		t.Errorf("send-pending without a region: exit %d, stderr %s", code, errOut.String())
	}
}
