//go:build integration

package replay

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/sqsmsg"
)

const origID = "0e9d8c7b-6a5f-4e3d-8c2b-1a0f9e8d7c6b"

// A dead letter is replayed with counter 1, 2, … MAX_ATTEMPTS, keeping the
// first message id throughout, then goes to the operator queue.
func TestReplayCountsUpThenOperatorQueue(t *testing.T) {
	t.Parallel()
	for _, maxAttempts := range []int{0, 1, 3} {
		t.Run(fmt.Sprint("MAX_ATTEMPTS=", maxAttempts), func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{env: map[string]string{"MAX_ATTEMPTS": strconv.Itoa(maxAttempts)}})
			rec := record(origID, "order 17", map[string]events.SQSMessageAttribute{"tenant": str("String", "acme")})
			for n := 1; n <= maxAttempts; n++ {
				if resp := b.handle(rec); len(resp.BatchItemFailures) != 0 {
					t.Fatalf("replay %d failed: %v", n, resp.BatchItemFailures)
				}
				m := b.receive(b.mainURL, 1)[0]
				if got := attr(m, sqsmsg.AttrReplayCount); got != "Number:"+strconv.Itoa(n) {
					t.Errorf("replay %d: counter %q", n, got)
				}
				if got := attr(m, sqsmsg.AttrOriginalMessageID); got != "String:"+origID {
					t.Errorf("replay %d: original id %q, want %q", n, got, origID)
				}
				if aws.ToString(m.Body) != "order 17" || attr(m, "tenant") != "String:acme" || attr(m, sqsmsg.AttrReason) != "" {
					t.Errorf("replay %d changed the message: %q %v", n, aws.ToString(m.Body), m.MessageAttributes)
				}
				rec = asRecord(m) // it fails again and comes back from the DLQ with a new id
			}
			if resp := b.handle(rec); len(resp.BatchItemFailures) != 0 {
				t.Fatalf("forward failed: %v", resp.BatchItemFailures)
			}
			m := b.receive(b.opURL, 1)[0]
			want := map[string]string{
				sqsmsg.AttrReason:            "String:max-attempts",
				sqsmsg.AttrReplayCount:       "Number:" + strconv.Itoa(maxAttempts),
				sqsmsg.AttrOriginalMessageID: "String:" + origID,
				"tenant":                     "String:acme",
			}
			for name, w := range want {
				if got := attr(m, name); got != w {
					t.Errorf("operator message %s = %q, want %q", name, got, w)
				}
			}
			b.empty(b.mainURL)
		})
	}
}

// moto honours DelaySeconds: with BACKOFF_BASE 1.5, rate 2 and no jitter,
// replay 1 is delayed 3 s.
func TestReplayArrivesAfterItsDelay(t *testing.T) {
	t.Parallel()
	b := setup(t, options{env: map[string]string{"BACKOFF_BASE": "1.5", "BACKOFF_RATE": "2"}})
	start := time.Now()
	b.handle(record(origID, "later", nil))
	b.empty(b.mainURL)
	m := b.receive(b.mainURL, 1)[0]
	if elapsed := time.Since(start); elapsed < 2*time.Second {
		t.Errorf("visible after %v, before its 3 s delay", elapsed)
	}
	if attr(m, sqsmsg.AttrReplayCount) != "Number:1" {
		t.Errorf("counter %q", attr(m, sqsmsg.AttrReplayCount))
	}
	if l := b.logs.lines(t); len(l) != 1 || l[0]["delaySeconds"] != 3.0 {
		t.Errorf("log %v, want one line with delaySeconds 3", l)
	}
}

// The sample event (testdata) carries every data type, custom suffixes and
// binary values; all reach the main queue byte for byte.
func TestEveryAttributeTypeRoundTrips(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ev := loadEvent(t)
	if resp := b.handle(ev.Records...); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures: %v", resp.BatchItemFailures)
	}
	got := map[string]sqstypes.Message{}
	for _, m := range b.receive(b.mainURL, len(ev.Records)) {
		got[aws.ToString(m.Body)] = m
	}
	wantCounter := []string{"Number:1", "Number:2"}
	wantOrig := []string{"String:" + ev.Records[0].MessageId, "String:11111111-2222-4333-8444-555555555555"}
	for i, rec := range ev.Records {
		m, ok := got[rec.Body]
		if !ok {
			t.Fatalf("record %d: body not received unchanged", i)
		}
		want := map[string]events.SQSMessageAttribute{}
		for name, a := range rec.MessageAttributes {
			if name != sqsmsg.AttrReplayCount {
				want[name] = a
			}
		}
		sameAttributes(t, m, want)
		// Added: the counter, the original id on a first replay, the first
		// enqueue (from SentTimestamp).
		if attr(m, sqsmsg.AttrReplayCount) != wantCounter[i] || attr(m, sqsmsg.AttrOriginalMessageID) != wantOrig[i] ||
			attr(m, sqsmsg.AttrFirstSent) != "Number:"+rec.Attributes["SentTimestamp"] || len(m.MessageAttributes) != len(want)+2+btoi(i == 0) {
			t.Errorf("record %d: counter %q, original id %q, first sent %q, %d attributes", i, attr(m, sqsmsg.AttrReplayCount),
				attr(m, sqsmsg.AttrOriginalMessageID), attr(m, sqsmsg.AttrFirstSent), len(m.MessageAttributes))
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestOperatorQueueReasons(t *testing.T) {
	t.Parallel()
	bin := events.SQSMessageAttribute{DataType: "Binary", BinaryValue: []byte{1}}
	tests := []struct {
		name       string
		body       string
		attrs      map[string]events.SQSMessageAttribute
		wantReason string // "" = forwarded without a reason (no room)
		wantAdded  int    // attributes the replayer added
	}{
		{"ten attributes: unchanged", "b", attrs(10), "", 0},
		{"nine attributes: room for the reason only", "b", attrs(9), ReasonAttributeLimit, 1},
		{"too large for the replay attributes", strings.Repeat("x", sqsmsg.MaxMessageBytes-20), nil, "", 0},
		{"counter -1", "b", map[string]events.SQSMessageAttribute{sqsmsg.AttrReplayCount: str("Number", "-1")}, ReasonInvalidCounter, 2},
		{"counter abc", "b", map[string]events.SQSMessageAttribute{sqsmsg.AttrReplayCount: str("String", "abc")}, ReasonInvalidCounter, 2},
		{"counter 1.5", "b", map[string]events.SQSMessageAttribute{sqsmsg.AttrReplayCount: str("Number", "1.5")}, ReasonInvalidCounter, 2},
		{"counter empty", "b", map[string]events.SQSMessageAttribute{sqsmsg.AttrReplayCount: str("String", "")}, ReasonInvalidCounter, 2},
		{"counter huge", "b", map[string]events.SQSMessageAttribute{sqsmsg.AttrReplayCount: str("Number", "99999999999999999999")}, ReasonInvalidCounter, 2},
		{"counter with sign", "b", map[string]events.SQSMessageAttribute{sqsmsg.AttrReplayCount: str("Number", "+1")}, ReasonInvalidCounter, 2},
		{"counter with space", "b", map[string]events.SQSMessageAttribute{sqsmsg.AttrReplayCount: str("String", " 1")}, ReasonInvalidCounter, 2},
		{"binary counter", "b", map[string]events.SQSMessageAttribute{sqsmsg.AttrReplayCount: bin}, ReasonInvalidCounter, 2},
		{"large valid counter", "b", map[string]events.SQSMessageAttribute{sqsmsg.AttrReplayCount: str("Number", "2147483646")}, ReasonMaxAttempts, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{})
			if resp := b.handle(record(origID, tt.body, tt.attrs)); len(resp.BatchItemFailures) != 0 {
				t.Fatalf("failures: %v", resp.BatchItemFailures)
			}
			m := b.receive(b.opURL, 1)[0]
			b.empty(b.mainURL)
			if aws.ToString(m.Body) != tt.body {
				t.Error("body changed")
			}
			sameAttributes(t, m, tt.attrs) // the counter too: an invalid one is kept for diagnosis
			if got := attr(m, sqsmsg.AttrReason); got != strings.TrimSuffix("String:"+tt.wantReason, "String:") {
				t.Errorf("reason %q, want %q", got, tt.wantReason)
			}
			if got := len(m.MessageAttributes) - len(tt.attrs); got != tt.wantAdded {
				t.Errorf("%d attributes added, want %d: %v", got, tt.wantAdded, m.MessageAttributes)
			}
			if tt.wantAdded >= 2 && attr(m, sqsmsg.AttrOriginalMessageID) != "String:"+origID {
				t.Errorf("original id %q", attr(m, sqsmsg.AttrOriginalMessageID))
			}
		})
	}
}

// The counter keeps the data type it arrived with.
func TestCounterDataTypes(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.handle(
		record("id-string", "s", map[string]events.SQSMessageAttribute{sqsmsg.AttrReplayCount: str("String", "0")}),
		record("id-custom", "c", map[string]events.SQSMessageAttribute{sqsmsg.AttrReplayCount: str("Number.int", "02")}),
	)
	want := map[string]string{"s": "String:1", "c": "Number.int:3"}
	for _, m := range b.receive(b.mainURL, 2) {
		if got := attr(m, sqsmsg.AttrReplayCount); got != want[aws.ToString(m.Body)] {
			t.Errorf("%s: counter %q, want %q", aws.ToString(m.Body), got, want[aws.ToString(m.Body)])
		}
	}
}

// Batching: one SendMessageBatch per destination for up to 10 messages.
func TestOneCallPerTenMessages(t *testing.T) {
	t.Parallel()
	atMax := map[string]events.SQSMessageAttribute{sqsmsg.AttrReplayCount: str("Number", "3")}
	tests := []struct {
		name               string
		recs               []events.SQSMessage
		mainCalls, opCalls int
	}{
		{"ten replays", records(10, "r", nil), 1, 0},
		{"six replays, four to the operator", append(records(6, "r", nil), records(4, "o", atMax)...), 1, 1},
		{"twelve replays", records(12, "r", nil), 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{})
			if resp := b.handle(tt.recs...); len(resp.BatchItemFailures) != 0 {
				t.Fatalf("failures: %v", resp.BatchItemFailures)
			}
			if m, o := b.api.callsTo(b.mainURL), b.api.callsTo(b.opURL); m != tt.mainCalls || o != tt.opCalls {
				t.Errorf("calls: main %d, operator %d; want %d, %d", m, o, tt.mainCalls, tt.opCalls)
			}
			nOp := 0
			for _, r := range tt.recs {
				if _, ok := r.MessageAttributes[sqsmsg.AttrReplayCount]; ok {
					nOp++
				}
			}
			b.receive(b.mainURL, len(tt.recs)-nOp)
			if nOp > 0 {
				b.receive(b.opURL, nOp)
			}
		})
	}
}

// Failures put exactly the affected records in batchItemFailures; the others
// are delivered.
func TestFailuresReportExactlyTheAffectedRecords(t *testing.T) {
	t.Parallel()
	atMax := map[string]events.SQSMessageAttribute{sqsmsg.AttrReplayCount: str("Number", "3")}
	tests := []struct {
		name       string
		fault      func(b *bundle)
		recs       []events.SQSMessage
		wantFailed []string
		wantMain   int
	}{
		{
			name:       "per-entry failure",
			fault:      func(b *bundle) { b.api.failBody = "r body 1" },
			recs:       records(3, "r", nil),
			wantFailed: []string{"r-1"},
			wantMain:   2,
		},
		{
			name:       "operator call fails as a whole",
			fault:      func(b *bundle) { b.api.failQueue = b.opURL },
			recs:       append(append(records(2, "r", nil), records(2, "o", atMax)...), record("bad", "x", map[string]events.SQSMessageAttribute{sqsmsg.AttrReplayCount: str("String", "x")})),
			wantFailed: []string{"o-0", "o-1", "bad"},
			wantMain:   2,
		},
		{
			name:       "main calls fail as a whole",
			fault:      func(b *bundle) { b.api.failQueue = b.mainURL },
			recs:       records(12, "r", nil),
			wantFailed: []string{"r-0", "r-1", "r-2", "r-3", "r-4", "r-5", "r-6", "r-7", "r-8", "r-9", "r-10", "r-11"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{})
			tt.fault(b)
			resp := b.handle(tt.recs...)
			var failed []string
			for _, f := range resp.BatchItemFailures {
				failed = append(failed, f.ItemIdentifier)
			}
			slices.Sort(failed)
			slices.Sort(tt.wantFailed)
			if !slices.Equal(failed, tt.wantFailed) {
				t.Errorf("batchItemFailures %v, want %v", failed, tt.wantFailed)
			}
			if tt.wantMain > 0 {
				b.receive(b.mainURL, tt.wantMain)
			}
			b.empty(b.mainURL)
			b.empty(b.opURL)
			var logged []string
			for _, l := range b.logs.lines(t) {
				if l["level"] == "ERROR" {
					logged = append(logged, l["messageId"].(string))
				}
			}
			slices.Sort(logged)
			if !slices.Equal(logged, tt.wantFailed) {
				t.Errorf("error lines for %v, want %v", logged, tt.wantFailed)
			}
		})
	}
}

// An expired invocation context fails every record rather than dropping any.
func TestCancelledContextFailsEveryRecord(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	resp, err := b.h.Handle(ctx, events.SQSEvent{Records: records(3, "r", nil)})
	if err != nil || len(resp.BatchItemFailures) != 3 {
		t.Errorf("Handle = %v, %v; want all 3 records failed and no error", resp, err)
	}
}

// A FIFO operator queue gets a group (the record's, or its id) and a
// deduplication id, so forwarding is never refused or repeated.
func TestFIFOOperatorQueue(t *testing.T) {
	t.Parallel()
	b := setup(t, options{fifoOperator: true, env: map[string]string{"MAX_ATTEMPTS": "0"}})
	b.handle(fifoRecord("with-group", "a", "g", nil), fifoRecord("without-group", "b", "", nil))
	b.handle(fifoRecord("with-group", "a", "g", nil)) // retried
	want := map[string]string{"a": "g", "b": "without-group"}
	for _, m := range b.receive(b.opURL, 2) {
		if g := m.Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)]; g != want[aws.ToString(m.Body)] {
			t.Errorf("%s: group %q, want %q", aws.ToString(m.Body), g, want[aws.ToString(m.Body)])
		}
		b.delete(m)
	}
	b.empty(b.opURL)
}

func (b *bundle) delete(m sqstypes.Message) {
	b.t.Helper()
	for _, url := range []string{b.mainURL, b.opURL} {
		_, _ = b.api.real.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle})
	}
}

// One log line per record with id, n, destination and delay or reason; never
// the body.
func TestLogsOneLinePerRecordWithoutBody(t *testing.T) {
	t.Parallel()
	b := setup(t, options{env: map[string]string{"BACKOFF_BASE": "1", "BACKOFF_RATE": "1"}})
	b.api.failBody = "SECRET-3"
	b.handle(
		record("m-1", "SECRET-1", nil),
		record("m-2", "SECRET-2", map[string]events.SQSMessageAttribute{sqsmsg.AttrReplayCount: str("Number", "3")}),
		record("m-3", "SECRET-3", nil),
	)
	b.logs.mu.Lock()
	raw := b.logs.b.String()
	b.logs.mu.Unlock()
	if strings.Contains(raw, "SECRET") {
		t.Errorf("a message body was logged:\n%s", raw)
	}
	want := []map[string]any{
		{"messageId": "m-1", "n": 1.0, "destination": "main", "delaySeconds": 1.0, "level": "INFO"},
		{"messageId": "m-2", "n": 4.0, "destination": "operator", "reason": ReasonMaxAttempts, "level": "WARN"},
		{"messageId": "m-3", "n": 1.0, "destination": "main", "level": "ERROR"},
	}
	lines := b.logs.lines(t)
	if len(lines) != len(want) {
		t.Fatalf("%d log lines, want %d:\n%s", len(lines), len(want), raw)
	}
	for i, w := range want {
		for k, v := range w {
			if lines[i][k] != v {
				t.Errorf("line %d: %s = %v, want %v", i, k, lines[i][k], v)
			}
		}
	}
}

// sqs-dlq-original-message-id is what the processor keys a replay on (its
// String value, or its Binary value in base64): an existing one, whatever
// its data type, reaches the main queue and then the operator queue byte for
// byte, never replaced by a String of the DLQ record's id.
func TestOriginalMessageIDKeptWhateverItsType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		orig events.SQSMessageAttribute
		fifo bool
	}{
		{"Binary", events.SQSMessageAttribute{DataType: "Binary", BinaryValue: []byte{0, 0xff, 'i', 'd', 0x80}}, false},
		{"Binary with a custom type", events.SQSMessageAttribute{DataType: "Binary.uuid", BinaryValue: []byte{0x0e, 0x9d, 0x8c, 0x7b}}, false},
		{"Binary on a FIFO main queue", events.SQSMessageAttribute{DataType: "Binary", BinaryValue: []byte{1, 2, 3}}, true},
		{"String with a custom type", str("String.uuid", origID), false},
		{"Number", str("Number", "42"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{fifoMain: tt.fifo, env: map[string]string{"MAX_ATTEMPTS": "1"}})
			want := map[string]events.SQSMessageAttribute{sqsmsg.AttrOriginalMessageID: tt.orig, "tenant": str("String", "acme")}
			rec := fifoRecord("dlq-record-id", "body", "g", want)
			if !tt.fifo {
				rec = record("dlq-record-id", "body", want)
			}
			if resp := b.handle(rec); len(resp.BatchItemFailures) != 0 {
				t.Fatalf("replay failed: %v", resp.BatchItemFailures)
			}
			replayed := b.receive(b.mainURL, 1)[0]
			sameAttributes(t, replayed, want)
			if attr(replayed, sqsmsg.AttrReplayCount) != "Number:1" {
				t.Errorf("counter %q, want Number:1", attr(replayed, sqsmsg.AttrReplayCount))
			}

			// It fails again: past MAX_ATTEMPTS, to the operator queue.
			if resp := b.handle(asRecord(replayed)); len(resp.BatchItemFailures) != 0 {
				t.Fatalf("forward failed: %v", resp.BatchItemFailures)
			}
			forwarded := b.receive(b.opURL, 1)[0]
			sameAttributes(t, forwarded, want)
			if attr(forwarded, sqsmsg.AttrReason) != "String:"+ReasonMaxAttempts {
				t.Errorf("reason %q", attr(forwarded, sqsmsg.AttrReason))
			}

			// An invalid counter goes to the operator queue by another path.
			bad := maps.Clone(want)
			bad[sqsmsg.AttrReplayCount] = str("String", "x")
			b.handle(record("dlq-record-2", "body", bad))
			sameAttributes(t, b.receive(b.opURL, 1)[0], bad)
		})
	}
}
