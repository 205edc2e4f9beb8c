//go:build integration

package ops_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/internal/ops"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// refusingSender refuses every message: the completion stays "completed,
// messages pending".
type refusingSender struct{}

func (refusingSender) Send(_ context.Context, msgs []sqsonce.Outgoing) []error {
	errs := make([]error, len(msgs))
	for i := range errs {
		errs[i] = errors.New("throttled")
	}
	return errs
}

// emitPending completes the env's key on the stack's table with msgs
// pending, as a processor whose send failed leaves it: the library's own
// Do, Emit and completion (Acquire, then Complete with the outbox).
func (e *recordsEnv) emitPending(msgs ...sqsonce.Message) {
	e.t.Helper()
	p, err := sqsonce.New(sqsonce.Config{
		Store: e.store, KeyPrefix: e.prefix, Sender: refusingSender{},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Test: sqsonce.TestConfig{Now: e.clock.Now},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	err = p.Do(context.Background(), e.key, func(ctx context.Context) error { return sqsonce.Emit(ctx, msgs...) })
	if !errors.Is(err, sqsonce.ErrEmitPending) {
		e.t.Fatalf("Do with the send refused: %v, want ErrEmitPending", err)
	}
}

// pending is what inspect --json says is pending for the env's key.
func (e *recordsEnv) pending() []ops.PendingMessage {
	e.t.Helper()
	r := e.run("", "inspect", "--stack", e.stack, "--json", e.key)
	var rec ops.Record
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil || r.code != ops.ExitOK {
		e.t.Fatalf("inspect --json: exit %d, %v", r.code, err)
	}
	return rec.Pending
}

func attribute(m sqstypes.Message, name string) string {
	if v, ok := m.MessageAttributes[name]; ok {
		return aws.ToString(v.StringValue)
	}
	return ""
}

// TestSendPendingSendsWithTheIDsInspectShows: a completion whose messages
// were not sent (to an SQS queue and an SNS FIFO topic) is shown by
// inspect with their emit ids; send-pending sends them with those ids and
// marks the record sent, and a second run has nothing to send.
func TestSendPendingSendsWithTheIDsInspectShows(t *testing.T) {
	t.Parallel()
	e := newRecordsEnv(t)
	cfg := mototest.Config(t)
	queue := mototest.NewQueue(t, cfg, false, nil)
	topic, fromTopic := mototest.NewTopicToQueue(t, cfg, true)
	e.emitPending(
		sqsonce.Message{To: "sqs:" + queue, Body: `{"order":"42","state":"accepted"}`, Attributes: map[string]string{"type": "OrderAccepted"}},
		sqsonce.Message{To: "sns:" + topic, GroupID: "tenant-7", Body: "audit: order 42 accepted"},
	)

	pending := e.pending()
	if len(pending) != 2 || pending[0].EmitID == "" || pending[0].EmitID == pending[1].EmitID {
		t.Fatalf("inspect --json: pending %+v, want two messages with their ids", pending)
	}
	r := e.run("", "inspect", "--stack", e.stack, e.key)
	for _, want := range []string{
		"COMPLETED, messages pending",
		"pending 2 messages not yet sent: the next delivery of the key sends them (and is then deleted as a duplicate), or sqs-once send-pending " + e.key + " sends them now",
		"#1 to sqs:" + queue + ", emit id " + pending[0].EmitID + `, 33 bytes "{\"order\":\"42\",\"state\":\"accepted\"}", 1 attribute`,
		"#2 to sns:" + topic + ", emit id " + pending[1].EmitID + `, group tenant-7, 24 bytes "audit: order 42 accepted", 0 attributes`,
	} {
		if !strings.Contains(words(r.stdout), words(want)) {
			t.Errorf("inspect says\n%s\nwithout %q", r.stdout, want)
		}
	}

	// Asked first; a no sends nothing.
	if r := e.run("n\n", "send-pending", "--stack", e.stack, e.key); r.code != ops.ExitRefused || !strings.Contains(r.stderr, "[y/N]") {
		t.Errorf("send-pending answered n: exit %d, want %d after a question", r.code, ops.ExitRefused)
	}
	r = e.run("y\n", "send-pending", "--stack", e.stack, e.key)
	if r.code != ops.ExitOK || !strings.Contains(r.stdout, "sent 2 messages of key \""+e.key+"\"") || !strings.Contains(r.stdout, "marked them sent: nothing is pending") {
		t.Fatalf("send-pending answered y: exit %d", r.code)
	}

	got := mototest.Receive(t, cfg, queue, 1, 10*time.Second)
	if len(got) != 1 || attribute(got[0], sqsonce.AttrEmitID) != pending[0].EmitID || attribute(got[0], "type") != "OrderAccepted" || aws.ToString(got[0].Body) != pending[0].Body {
		t.Errorf("the queue received %+v; want the message with %s %s", got, sqsonce.AttrEmitID, pending[0].EmitID)
	}
	got = mototest.Receive(t, cfg, fromTopic, 1, 10*time.Second)
	if len(got) != 1 || attribute(got[0], sqsonce.AttrEmitID) != pending[1].EmitID || got[0].Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)] != "tenant-7" {
		t.Errorf("the topic delivered %+v; want the message with %s %s in group tenant-7", got, sqsonce.AttrEmitID, pending[1].EmitID)
	}

	rec, err := e.store.Read(context.Background(), e.id())
	if err != nil || rec.Status != store.StatusCompleted || rec.Outbox != nil {
		t.Errorf("record after send-pending: %v, outbox %q, %v; want COMPLETED with no outbox", rec, rec.Outbox, err)
	}
	if p := e.pending(); len(p) != 0 {
		t.Errorf("inspect after send-pending: %d pending", len(p))
	}
	if r := e.run("", "send-pending", "--stack", e.stack, e.key); r.code != ops.ExitOK || !strings.Contains(r.stdout, "nothing to send") || strings.Contains(r.stderr, "[y/N]") {
		t.Errorf("send-pending with nothing pending: exit %d", r.code)
	}
	if got := mototest.Receive(t, cfg, queue, 1, 2*time.Second); len(got) != 0 {
		t.Errorf("a second send-pending sent %d more", len(got))
	}
}

// TestSendPendingToAMissingQueue: a destination that refuses exits 5 and
// leaves the messages pending, the record untouched.
func TestSendPendingToAMissingQueue(t *testing.T) {
	t.Parallel()
	e := newRecordsEnv(t)
	cfg := mototest.Config(t)
	queue := mototest.NewQueue(t, cfg, false, nil)
	e.emitPending(sqsonce.Message{To: "sqs:" + queue + "-gone", Body: "lost?"})
	r := e.run("", "send-pending", "--stack", e.stack, "--yes", "--json", e.key)
	var res ops.SendResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != ops.ExitIncomplete {
		t.Fatalf("send-pending to a missing queue: exit %d (%v), want %d", r.code, err, ops.ExitIncomplete)
	}
	if res.Marked || len(res.Messages) != 1 || res.Messages[0].Sent || res.Messages[0].Error == "" {
		t.Errorf("send-pending --json = %+v; want the message not sent, with its error", res)
	}
	if rec, err := e.store.Read(context.Background(), e.id()); err != nil || rec.Outbox == nil {
		t.Errorf("record after a failed send-pending: %v, %v; want its outbox kept", rec, err)
	}
}

// statusPending runs status --pending --json on the env's stack and
// prefix and returns what it counted.
func (e *recordsEnv) statusPending(args ...string) ops.PendingCount {
	e.t.Helper()
	r := e.run("", append([]string{"status", "--stack", e.stack, "--key-prefix", e.prefix, "--pending", "--json"}, args...)...)
	var rep struct {
		Pending *ops.PendingCount `json:"pending"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != ops.ExitOK || rep.Pending == nil {
		e.t.Fatalf("status --pending --json: exit %d, %v, pending %v", r.code, err, rep.Pending)
	}
	return *rep.Pending
}

// TestStatusCountsKeysWithMessagesPending: status --pending scans the
// stack's table for the prefix's completions with messages pending and
// counts those completed five minutes ago or more, telling a completion's
// time by the processor's DEDUPE_WINDOW; a completion with nothing
// pending, a lock and another prefix's pending key are not counted, and a
// key send-pending sent is no longer.
func TestStatusCountsKeysWithMessagesPending(t *testing.T) {
	t.Parallel()
	e := newRecordsEnv(t)
	// A prefix of its own: the other tests' keys on the stack's table are
	// not this test's count.
	e.prefix = mototest.Name("pending")
	queue := mototest.NewQueue(t, mototest.Config(t), false, nil)
	old := e.key
	start := e.clock.Now()
	e.emitPending(sqsonce.Message{To: "sqs:" + queue, Body: "accepted"})

	// Beside it: a completion with nothing pending, a live lock, and a
	// key pending under another prefix.
	e.key = mototest.Name("done")
	e.complete(e.acquire(time.Minute), 24*time.Hour)
	e.key = mototest.Name("held")
	e.acquire(10 * time.Minute)
	other := *e
	other.prefix = mototest.Name("other")
	other.key = mototest.Name("order")
	other.emitPending(sqsonce.Message{To: "sqs:" + queue, Body: "elsewhere"})

	e.clock.Advance(time.Minute)
	p := e.statusPending()
	if p.Keys != 1 || p.Past == nil || *p.Past != 0 || p.DedupeWindowSeconds != 86400 || len(p.Listed) != 0 {
		t.Errorf("status --pending a minute after the completion = %+v; want 1 key pending, none for 5 minutes, the window 86400 s read from the processor", p)
	}
	r := e.run("", "status", "--stack", e.stack, "--key-prefix", e.prefix, "--pending")
	for _, want := range []string{
		"0 keys with emitted messages pending for 5m0s or more under " + e.prefix + "# in table " + e.table,
		"(1 pending in all;",
		"1 key completed less than 5m0s ago: its first send may still be under way",
	} {
		if r.code != ops.ExitOK || !strings.Contains(words(r.stdout), words(want)) {
			t.Errorf("status --pending: exit %d, says\n%s\nwithout %q", r.code, r.stdout, want)
		}
	}
	if strings.Contains(r.stdout, "next:") {
		t.Errorf("status --pending with nothing past the age gives a next step:\n%s", r.stdout)
	}

	e.clock.Advance(5 * time.Minute)
	p = e.statusPending()
	if p.Keys != 1 || p.Past == nil || *p.Past != 1 || len(p.Listed) != 1 || p.Listed[0].Key != old || p.Listed[0].RecordID != store.RecordID(e.prefix, old) ||
		p.Listed[0].CompletedAt == nil || !p.Listed[0].CompletedAt.Equal(start) || p.Listed[0].WindowEnded {
		t.Errorf("status --pending six minutes after the completion = %+v; want %s listed, completed at %v", p, old, start)
	}
	r = e.run("", "status", "--stack", e.stack, "--key-prefix", e.prefix, "--pending")
	for _, want := range []string{
		"1 key with emitted messages pending for 5m0s or more under " + e.prefix + "# in table " + e.table,
		"a key's completion time is its window's end less the dedupe window, 24h0m0s (the processor's DEDUPE_WINDOW)",
		old + " " + start.UTC().Format(time.RFC3339) + " (6m0s ago)",
		"next: sqs-once inspect KEY shows a key's pending messages; sqs-once send-pending KEY sends them now",
	} {
		if r.code != ops.ExitOK || !strings.Contains(words(r.stdout), words(want)) {
			t.Errorf("status --pending: exit %d, says\n%s\nwithout %q", r.code, r.stdout, want)
		}
	}
	if p := e.statusPending("--pending-age", "10m"); p.Past == nil || *p.Past != 0 {
		t.Errorf("status --pending --pending-age 10m = %+v; want none pending for 10 minutes", p)
	}

	e.key = old
	if r := e.run("", "send-pending", "--stack", e.stack, "--key-prefix", e.prefix, "--yes", old); r.code != ops.ExitOK {
		t.Fatalf("send-pending: exit %d", r.code)
	}
	if p := e.statusPending(); p.Keys != 0 || p.Past == nil || *p.Past != 0 || p.Scanned == 0 {
		t.Errorf("status --pending after send-pending = %+v; want nothing pending, the table scanned", p)
	}
}
