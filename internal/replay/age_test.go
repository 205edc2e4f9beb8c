package replay

import (
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/internal/jitter"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
)

// t0 is a first enqueue the tests stamp: 2026-01-01T00:00:00Z.
var t0 = time.UnixMilli(1_767_225_600_000)

func millis(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

func sentRecord(id string, sent time.Time, attrs map[string]events.SQSMessageAttribute) events.SQSMessage {
	r := record(id, id+" body", attrs)
	r.Attributes["SentTimestamp"] = millis(sent)
	return r
}

func TestExpired(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		first     time.Time
		maxAge    time.Duration
		visibleAt time.Time
		want      bool
	}{
		{"no limit", t0, 0, t0.Add(1000 * time.Hour), false},
		{"unknown first enqueue", time.Time{}, time.Hour, t0, false},
		{"younger", t0, time.Hour, t0.Add(59 * time.Minute), false},
		{"exactly the limit", t0, time.Hour, t0.Add(time.Hour), false},
		{"a millisecond over", t0, time.Hour, t0.Add(time.Hour + time.Millisecond), true},
		{"first enqueue after now (clock skew)", t0.Add(time.Minute), time.Hour, t0, false},
	}
	for _, tt := range tests {
		if got := Expired(tt.first, tt.maxAge, tt.visibleAt); got != tt.want {
			t.Errorf("%s: Expired = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// decide with an injected now: where the first enqueue comes from, when it
// is stamped, and when the age sends a message to the operator queue. The
// replay's delay counts: the age is the one it would have when visible.
func TestDecideFirstSentAndAge(t *testing.T) {
	t.Parallel()
	stamped := func(v string, more map[string]events.SQSMessageAttribute) map[string]events.SQSMessageAttribute {
		m := map[string]events.SQSMessageAttribute{sqsmsg.AttrFirstSent: str("Number", v)}
		for k, a := range more {
			m[k] = a
		}
		return m
	}
	full := attrs(8) // room for the original id and the counter, not the stamp
	tests := []struct {
		name      string
		fifo      bool
		rec       events.SQSMessage
		now       time.Time
		wantQueue string // "main", "operator" or "dlq" (held)
		wantFirst string // sqs-once-first-sent sent on, "" = none
		wantNoted bool   // logged as not stamped for lack of room
	}{
		{"first replay: stamped from SentTimestamp", false, sentRecord("a", t0, nil), t0.Add(time.Minute), "main", "Number:" + millis(t0), false},
		{"later replay: kept, not restamped from the new SentTimestamp", false,
			sentRecord("b", t0.Add(50*time.Minute), stamped(millis(t0), map[string]events.SQSMessageAttribute{sqsmsg.AttrReplayCount: str("Number", "1")})),
			t0.Add(55 * time.Minute), "main", "Number:" + millis(t0), false},
		{"String data type kept", false, sentRecord("c", t0, map[string]events.SQSMessageAttribute{sqsmsg.AttrFirstSent: str("String", millis(t0))}),
			t0.Add(time.Minute), "main", "String:" + millis(t0), false},
		{"delay pushes it over: expired", false, sentRecord("d", t0, nil), t0.Add(time.Hour - time.Second), "operator", "Number:" + millis(t0), false},
		{"delay keeps it within", false, sentRecord("e", t0, nil), t0.Add(time.Hour - 4*time.Second), "main", "Number:" + millis(t0), false},
		{"stamp older than SentTimestamp rules", false, sentRecord("f", t0.Add(59*time.Minute), stamped(millis(t0), nil)), t0.Add(time.Hour), "operator", "Number:" + millis(t0), false},
		{"invalid stamp kept as is; SentTimestamp counts", false, sentRecord("g", t0.Add(59*time.Minute), stamped("yesterday", nil)), t0.Add(59 * time.Minute), "main", "Number:yesterday", false},
		{"no SentTimestamp, no stamp: no age limit", false, record("h", "h body", nil), t0.Add(1000 * time.Hour), "main", "", false},
		{"no room: replayed unstamped", false, sentRecord("i", t0, full), t0.Add(time.Minute), "main", "", true},
		{"no room, too old by SentTimestamp: expired", false, sentRecord("j", t0, full), t0.Add(2 * time.Hour), "operator", "", true},
		{"FIFO, backoff not served: held", true, fifoSent("k", t0, nil), t0.Add(time.Second), "dlq", "", false},
		{"FIFO, the hold would pass the limit: expired now", true, fifoSent("l", t0, stamped(millis(t0.Add(-time.Hour)), nil)), t0.Add(time.Second), "operator", "Number:" + millis(t0.Add(-time.Hour)), false},
		{"FIFO, backoff served: sent", true, fifoSent("m", t0, nil), t0.Add(4 * time.Second), "main", "Number:" + millis(t0), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			main := mainURL
			if tt.fifo {
				main += ".fifo"
			}
			// JITTER none: replay 1 waits 4 s.
			h := New(Config{MainQueueURL: main, OperatorQueueURL: opURL, MaxAttempts: 3, MaxMessageAge: time.Hour,
				Backoff: backoff4s}, Deps{})
			d := h.decide(tt.rec, 0.5, tt.now)
			queue := map[string]string{main: "main", opURL: "operator"}[d.queue]
			if d.action == hold {
				queue = "dlq"
			}
			if queue != tt.wantQueue {
				t.Fatalf("to %q (%+v), want %s", queue, d, tt.wantQueue)
			}
			if tt.wantQueue == "operator" && !tt.wantNoted && tt.wantFirst != "" {
				if r := aws.ToString(d.entry.Attributes[sqsmsg.AttrReason].StringValue); r != ReasonExpired {
					t.Errorf("reason %q, want %s", r, ReasonExpired)
				}
			}
			if queue == "dlq" {
				return
			}
			got := ""
			if a, ok := d.entry.Attributes[sqsmsg.AttrFirstSent]; ok {
				got = aws.ToString(a.DataType) + ":" + aws.ToString(a.StringValue)
			}
			if got != tt.wantFirst || d.unstamped != tt.wantNoted {
				t.Errorf("first sent %q (not stamped: %v), want %q (%v)", got, d.unstamped, tt.wantFirst, tt.wantNoted)
			}
		})
	}
}

func fifoSent(id string, sent time.Time, attrs map[string]events.SQSMessageAttribute) events.SQSMessage {
	r := fifoRecord(id, id+" body", "g", attrs)
	r.Attributes["SentTimestamp"] = millis(sent)
	return r
}

// backoff4s is JITTER none, base 2 s, rate 2: replay 1 waits 4 s.
var backoff4s = jitter.Policy{Base: 2 * time.Second, Rate: 2, Cap: MaxDelay, Strategy: jitter.None}
