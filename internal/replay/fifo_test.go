//go:build integration

package replay

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/internal/testclock"
)

const traceHeader = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"

// deadLetter puts a message in a FIFO queue standing for the DLQ, as SQS
// moves one there (same body, attributes and group; the move gives it its
// own deduplication id), and receives it back as the record Lambda would
// deliver, with a receipt handle the replayer can hide it by.
func (b *bundle) deadLetter(dlq, body, group string, attrs map[string]sqstypes.MessageAttributeValue) events.SQSMessage {
	b.t.Helper()
	_, err := b.api.real.SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: aws.String(dlq), MessageBody: aws.String(body), MessageAttributes: attrs,
		MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(mototest.Name("moved")),
		MessageSystemAttributes: map[string]sqstypes.MessageSystemAttributeValue{
			sqsmsg.SystemAttrTraceHeader: {DataType: aws.String("String"), StringValue: aws.String(traceHeader)},
		},
	})
	if err != nil {
		b.t.Fatal(err)
	}
	rec := asRecord(b.receive(dlq, 1)[0])
	rec.EventSourceARN = mototest.QueueARN(b.t, b.aws, dlq)
	return rec
}

func (b *bundle) deleteFrom(url string, rec events.SQSMessage) {
	b.t.Helper()
	if _, err := b.api.real.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String(rec.ReceiptHandle)}); err != nil {
		b.t.Fatal(err)
	}
}

func failedIDs(resp events.SQSEventResponse) []string {
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	slices.Sort(ids)
	return ids
}

// FIFO main queue, which refuses per-message delays: each replay's backoff
// is served in the FIFO DLQ (the record is hidden for the time left and
// reported failed, nothing is sent), then the replay is sent with no delay,
// its group kept and a deduplication id of its own, so that every attempt
// up to MAX_ATTEMPTS is delivered again, while Lambda's retry of the same
// record is deduplicated. After the last attempt: the operator queue.
func TestFIFOReplaysEveryAttemptAfterItsBackoffInTheDLQ(t *testing.T) {
	t.Parallel()
	clk := testclock.New(time.Time{})
	b := setup(t, options{fifoMain: true, fifoOperator: true, now: clk.Now,
		env: map[string]string{"MAX_ATTEMPTS": "3", "BACKOFF_BASE": "2", "BACKOFF_RATE": "2"}}) // JITTER none: 4, 8, 16 s
	dlq := mototest.NewQueue(t, b.aws, true, nil)
	rec := b.deadLetter(dlq, "fifo body", "customer-7", map[string]sqstypes.MessageAttributeValue{"tenant": sqsmsg.String("acme")})
	seen := map[string]int{} // deduplication id -> replay
	for n := 1; n <= 3; n++ {
		sent := sentAt(t, rec)
		delay := time.Duration(2<<n) * time.Second

		clk.Set(sent.Add(time.Second))
		if got := failedIDs(b.handle(rec)); !slices.Equal(got, []string{rec.MessageId}) {
			t.Fatalf("replay %d before its backoff: failures %v, want the record held", n, got)
		}
		b.empty(b.mainURL)
		if v := b.api.visibilities(); len(v) != n || v[n-1] != int32((delay-time.Second)/time.Second) {
			t.Fatalf("replay %d: visibility timeouts asked %v, want the last %v", n, v, delay-time.Second)
		}

		clk.Set(sent.Add(delay))
		for try := range 2 { // Lambda retrying the same record: deduplicated
			if got := failedIDs(b.handle(rec)); len(got) != 0 {
				t.Fatalf("replay %d, try %d: failures %v", n, try, got)
			}
		}
		m := b.receive(b.mainURL, 1)[0]
		if g := m.Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)]; g != "customer-7" {
			t.Errorf("replay %d: group %q, want customer-7", n, g)
		}
		d := m.Attributes[string(sqstypes.MessageSystemAttributeNameMessageDeduplicationId)]
		if prev, dup := seen[d]; dup || d == "" {
			t.Errorf("replay %d: deduplication id %q, already replay %d's: SQS would drop it", n, d, prev)
		}
		seen[d] = n
		if attr(m, sqsmsg.AttrReplayCount) != "Number:"+strconv.Itoa(n) || attr(m, "tenant") != "String:acme" || aws.ToString(m.Body) != "fifo body" {
			t.Errorf("replay %d: %q %v", n, aws.ToString(m.Body), m.MessageAttributes)
		}
		b.deleteFrom(dlq, rec) // Lambda deletes the replayed record
		b.delete(m)
		b.empty(b.mainURL) // the retried send was deduplicated
		rec = b.deadLetter(dlq, aws.ToString(m.Body), "customer-7", m.MessageAttributes)
	}
	clk.Set(sentAt(t, rec)) // no backoff on the way to the operator queue
	if got := failedIDs(b.handle(rec)); len(got) != 0 {
		t.Fatalf("forward: failures %v", got)
	}
	op := b.receive(b.opURL, 1)[0]
	if attr(op, sqsmsg.AttrReason) != "String:"+ReasonMaxAttempts || attr(op, sqsmsg.AttrReplayCount) != "Number:3" ||
		op.Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)] != "customer-7" {
		t.Errorf("operator message %v %v", op.Attributes, op.MessageAttributes)
	}
	b.empty(b.mainURL)

	b.handle(fifoRecord("no-group", "orphan", "", nil))
	m := b.receive(b.opURL, 1)[0]
	if attr(m, sqsmsg.AttrReason) != "String:"+ReasonMissingGroupID || aws.ToString(m.Body) != "orphan" {
		t.Errorf("operator message %q %v", aws.ToString(m.Body), m.MessageAttributes)
	}
}

// A held record holds its group: the later records of that group in the
// batch are reported failed unsent, whatever their own backoff, while other
// groups go on. A record the replayer cannot hide (here: no eventSourceARN)
// is still reported failed, never sent early.
func TestFIFOHoldKeepsTheGroupsOrder(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_767_225_600_000)
	b := setup(t, options{fifoMain: true, now: func() time.Time { return now }, env: map[string]string{"BACKOFF_BASE": "2"}})
	withSent := func(id, group string, sent time.Time) events.SQSMessage {
		r := fifoRecord(id, id+" body", group, nil)
		r.Attributes["SentTimestamp"] = strconv.FormatInt(sent.UnixMilli(), 10)
		return r
	}
	resp := b.handle(
		withSent("g-1", "g", now),                   // backoff not served: held
		withSent("g-2", "g", now.Add(-time.Hour)),   // would be due, but behind g-1
		withSent("h-1", "h", now.Add(-time.Hour)),   // due: sent
		withSent("g-3", "g", now.Add(-2*time.Hour)), // behind g-1 too
	)
	if got, want := failedIDs(resp), []string{"g-1", "g-2", "g-3"}; !slices.Equal(got, want) {
		t.Errorf("failures %v, want %v", got, want)
	}
	if m := b.receive(b.mainURL, 1)[0]; aws.ToString(m.Body) != "h-1 body" {
		t.Errorf("sent %q, want h-1's", aws.ToString(m.Body))
	}
	b.empty(b.mainURL)
	levels := map[string]any{}
	for _, l := range b.logs.lines(t) {
		levels[l["messageId"].(string)] = l["destination"]
	}
	if levels["g-1"] != "dlq" || levels["g-2"] != "dlq" || levels["h-1"] != "main" {
		t.Errorf("logged destinations %v", levels)
	}
}

// A send whose answer is lost (applied by SQS, then a 500; the SDK sends it
// again) reaches a FIFO main queue once: the retry carries the same
// deduplication id. The fault is scripted to hit only a request that carries
// the record's trace header as the AWSTraceHeader system attribute, so its
// firing shows the header on the wire. moto 5.2.1 drops system attributes
// sent with SendMessageBatch (it never passes them on), so a receive cannot
// show the header: the wire is where it is checked.
func TestLostAnswerAndTraceHeaderOnTheWire(t *testing.T) {
	t.Parallel()
	p, err := faultproxy.Start(mototest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	wire := fmt.Sprintf(`"MessageSystemAttributes":{%q:{"DataType":"String","StringValue":%q}}`, sqsmsg.SystemAttrTraceHeader, traceHeader)
	for _, dest := range []string{"main", "operator"} {
		t.Run(dest, func(t *testing.T) {
			cfg := mototest.Config(t)
			mainURL, opURL := mototest.NewQueue(t, cfg, true, nil), mototest.NewQueue(t, cfg, true, nil)
			env := map[string]string{"MAIN_QUEUE_URL": mainURL, "OPERATOR_QUEUE_URL": opURL, "BACKOFF_BASE": "0"}
			to := mainURL
			if dest == "operator" {
				env["MAX_ATTEMPTS"], to = "0", opURL
			}
			c, err := LoadConfig(envconfig.Map(env))
			if err != nil {
				t.Fatal(err)
			}
			client := sqs.NewFromConfig(cfg, func(o *sqs.Options) {
				o.BaseEndpoint = aws.String(p.URL)
				o.Retryer = retry.AddWithMaxBackoffDelay(retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter = ratelimit.None }), 10*time.Millisecond)
			})
			p.ScriptWhen("SendMessageBatch", faultproxy.BodyContains(wire), faultproxy.FailAfter)
			h := New(c, Deps{SQS: client})
			rec := fifoRecord(origID+"-"+dest, "traced", "g", nil)
			rec.Attributes[sqsmsg.SystemAttrTraceHeader] = traceHeader
			resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{rec}})
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("Handle = %v, %v", resp, err)
			}
			if p.Pending() != 0 {
				t.Fatalf("no SendMessageBatch carried %s", wire)
			}
			got := mototest.Receive(t, cfg, to, 2, 2*time.Second)
			if len(got) != 1 {
				t.Fatalf("%d copies arrived, want 1: the retried send must be deduplicated", len(got))
			}
			if h, ok := got[0].Attributes[sqsmsg.SystemAttrTraceHeader]; ok && h != traceHeader {
				t.Errorf("AWSTraceHeader %q, want %q", h, traceHeader)
			}
		})
	}
}
