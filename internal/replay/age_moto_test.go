//go:build integration

package replay

import (
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/internal/testclock"
)

// sqs-once-first-sent is stamped on the first replay from the DLQ record's
// SentTimestamp and sent on unchanged by every later replay (each of which
// SQS gives a SentTimestamp of its own) and to the operator queue.
func TestFirstSentSurvivesReplays(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	rec := sentRecord(origID, t0, nil)
	want := "Number:" + millis(t0)
	for n := 1; n <= 3; n++ {
		if resp := b.handle(rec); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("replay %d: failures %v", n, resp.BatchItemFailures)
		}
		m := b.receive(b.mainURL, 1)[0]
		if got := attr(m, sqsmsg.AttrFirstSent); got != want {
			t.Errorf("replay %d: %s = %q, want %q", n, sqsmsg.AttrFirstSent, got, want)
		}
		rec = asRecord(m)
		if rec.Attributes["SentTimestamp"] == millis(t0) {
			t.Fatalf("replay %d kept the original SentTimestamp: the test would prove nothing", n)
		}
	}
	b.handle(rec)
	if got := attr(b.receive(b.opURL, 1)[0], sqsmsg.AttrFirstSent); got != want {
		t.Errorf("operator message: %s = %q, want %q", sqsmsg.AttrFirstSent, got, want)
	}
}

// With MAX_MESSAGE_AGE, a replay that would become visible past the limit
// (its delay counted) goes to the operator queue as expired, with its first
// enqueue for the operator to see; the replay before it, within the limit,
// went to the main queue.
func TestExpiredReachesTheOperatorQueue(t *testing.T) {
	t.Parallel()
	clk := testclock.New(time.Time{})
	b := setup(t, options{now: clk.Now, env: map[string]string{"MAX_MESSAGE_AGE": "3600", "BACKOFF_BASE": "2", "BACKOFF_RATE": "2"}}) // 4, 8 s
	clk.Set(t0.Add(time.Hour - 4*time.Second))                                                                                        // visible at exactly the limit
	if resp := b.handle(sentRecord(origID, t0, nil)); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("replay 1: failures %v", resp.BatchItemFailures)
	}
	b.empty(b.opURL)
	m := b.receive(b.mainURL, 1)[0]

	clk.Set(t0.Add(time.Hour - 7*time.Second)) // replay 2 would be visible 1 s past it
	if resp := b.handle(asRecord(m)); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("forward: failures %v", resp.BatchItemFailures)
	}
	op := b.receive(b.opURL, 1)[0]
	b.empty(b.mainURL)
	want := map[string]string{
		sqsmsg.AttrReason:            "String:" + ReasonExpired,
		sqsmsg.AttrFirstSent:         "Number:" + millis(t0),
		sqsmsg.AttrReplayCount:       "Number:1",
		sqsmsg.AttrOriginalMessageID: "String:" + origID,
	}
	for name, w := range want {
		if got := attr(op, name); got != w {
			t.Errorf("operator message %s = %q, want %q", name, got, w)
		}
	}
	if l := b.logs.lines(t); len(l) != 2 || l[1]["reason"] != ReasonExpired || l[1]["firstSent"] != float64(t0.UnixMilli()) {
		t.Errorf("log lines %v", l)
	}
}
