package replay

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/jitter"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
)

const (
	mainURL = "https://sqs.us-east-1.amazonaws.com/123456789012/orders"
	opURL   = "https://sqs.us-east-1.amazonaws.com/123456789012/orders-operator"
)

func TestLoadConfigDefaults(t *testing.T) {
	t.Parallel()
	c, err := LoadConfig(envconfig.Map(map[string]string{"MAIN_QUEUE_URL": mainURL, "OPERATOR_QUEUE_URL": opURL}))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{MainQueueURL: mainURL, OperatorQueueURL: opURL, MaxAttempts: 3,
		Backoff: jitter.Policy{Base: 2 * time.Second, Rate: 2, Cap: 900 * time.Second, Strategy: jitter.Full}}
	if c != want {
		t.Errorf("defaults %+v, want %+v", c, want)
	}
}

func TestLoadConfigNamesEveryBadVariable(t *testing.T) {
	t.Parallel()
	good := map[string]string{"MAIN_QUEUE_URL": mainURL, "OPERATOR_QUEUE_URL": opURL}
	tests := []struct {
		name, value string
		also        map[string]string
	}{
		{"MAIN_QUEUE_URL", "", nil},
		{"MAIN_QUEUE_URL", "orders", nil},
		{"MAIN_QUEUE_URL", "ftp://sqs/123/q", nil},
		{"OPERATOR_QUEUE_URL", "   ", nil},
		{"OPERATOR_QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/", nil},
		{"OPERATOR_QUEUE_URL", mainURL, nil},
		{"MAX_ATTEMPTS", "-1", nil},
		{"MAX_ATTEMPTS", "three", nil},
		{"MAX_ATTEMPTS", "1001", nil},
		{"BACKOFF_BASE", "-1", nil},
		{"BACKOFF_BASE", "901", nil},
		{"BACKOFF_BASE", "NaN", nil},
		{"BACKOFF_RATE", "0.5", nil},
		{"BACKOFF_RATE", "Inf", nil},
		{"MAX_DELAY", "901", nil},
		{"MAX_DELAY", "1.5", nil},
		{"MAX_DELAY", "-1", nil},
		{"JITTER", "random", nil},
		{"MAX_MESSAGE_AGE", "-1", nil},
		{"MAX_MESSAGE_AGE", "1209601", nil}, // past SQS's 14-day retention
		{"MAX_MESSAGE_AGE", "1.5", nil},
		{"MAX_MESSAGE_AGE", "1d", nil},
	}
	for _, tt := range tests {
		env := maps.Clone(good)
		env[tt.name] = tt.value
		_, err := LoadConfig(envconfig.Map(env))
		if err == nil || !strings.Contains(err.Error(), "environment variable "+tt.name+":") {
			t.Errorf("%s=%q: error %v does not name the variable", tt.name, tt.value, err)
		}
	}
	_, err := LoadConfig(envconfig.Map(map[string]string{"MAX_ATTEMPTS": "x", "JITTER": "y"}))
	for _, name := range []string{"MAIN_QUEUE_URL", "OPERATOR_QUEUE_URL", "MAX_ATTEMPTS", "JITTER"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("error %v does not name %s: every bad variable is reported at once", err, name)
		}
	}
}

func TestLoadConfigAcceptsEdges(t *testing.T) {
	t.Parallel()
	c, err := LoadConfig(envconfig.Map(map[string]string{
		"MAIN_QUEUE_URL": mainURL + ".fifo", "OPERATOR_QUEUE_URL": "http://127.0.0.1:5000/123456789012/op",
		"MAX_ATTEMPTS": "0", "BACKOFF_BASE": "0.25", "BACKOFF_RATE": "1", "MAX_DELAY": "0", "JITTER": " Decorrelated ",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxAttempts != 0 || c.Backoff.Base != 250*time.Millisecond || c.Backoff.Rate != 1 || c.Backoff.Cap != 0 || c.Backoff.Strategy != jitter.Decorrelated {
		t.Errorf("config %+v", c)
	}
	for value, want := range map[string]time.Duration{"": 0, "0": 0, "60": time.Minute, "1209600": 14 * 24 * time.Hour} {
		c, err := LoadConfig(envconfig.Map(map[string]string{"MAIN_QUEUE_URL": mainURL, "OPERATOR_QUEUE_URL": opURL, "MAX_MESSAGE_AGE": value}))
		if err != nil || c.MaxMessageAge != want {
			t.Errorf("MAX_MESSAGE_AGE=%q: %v, %v; want %v", value, c.MaxMessageAge, err, want)
		}
	}
}

// decide without a network: delays, caps and FIFO deduplication ids.
func TestDecideDelays(t *testing.T) {
	t.Parallel()
	counter := func(n string) map[string]events.SQSMessageAttribute {
		return map[string]events.SQSMessageAttribute{sqsmsg.AttrReplayCount: str("Number", n)}
	}
	tests := []struct {
		name  string
		env   map[string]string
		attrs map[string]events.SQSMessageAttribute
		r     float64
		want  int32
	}{
		{"full jitter, half the ceiling of replay 1", nil, nil, 0.5, 2},
		{"full jitter, replay 3", nil, counter("2"), 0.5, 8},
		{"full jitter can be 0", nil, nil, 0, 0},
		{"none, replay 3", map[string]string{"JITTER": "none"}, counter("2"), 0, 16},
		{"equal, low end", map[string]string{"JITTER": "equal"}, counter("2"), 0, 8},
		{"capped at 900", map[string]string{"JITTER": "none", "MAX_ATTEMPTS": "1000"}, counter("999"), 0, 900},
		{"MAX_DELAY reached", map[string]string{"JITTER": "none", "MAX_DELAY": "10", "MAX_ATTEMPTS": "9"}, counter("5"), 0, 10},
		{"rounded to whole seconds", map[string]string{"JITTER": "none", "BACKOFF_BASE": "0.7", "BACKOFF_RATE": "1"}, nil, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"MAIN_QUEUE_URL": mainURL, "OPERATOR_QUEUE_URL": opURL}
			maps.Copy(env, tt.env)
			c, err := LoadConfig(envconfig.Map(env))
			if err != nil {
				t.Fatal(err)
			}
			d := New(c, Deps{}).decide(record("m", "b", tt.attrs), tt.r, time.Now())
			if d.queue != mainURL || d.entry.DelaySeconds != tt.want {
				t.Errorf("to %s with delay %d, want main with %d", d.queue, d.entry.DelaySeconds, tt.want)
			}
		})
	}
}

// A FIFO replay's deduplication id is the same when Lambda retries one DLQ
// record (deduplicated), and fresh for a new dead letter even with the same
// original id and n, as after an operator reset the counter: SQS would
// otherwise accept and silently drop it within its 5-minute window.
func TestFIFODeduplicationID(t *testing.T) {
	t.Parallel()
	h := New(Config{MainQueueURL: mainURL + ".fifo", OperatorQueueURL: opURL, MaxAttempts: 5}, Deps{})
	withOrig := func(id, orig, n string) events.SQSMessage {
		return fifoRecord(id, "b", "g", map[string]events.SQSMessageAttribute{sqsmsg.AttrOriginalMessageID: str("String", orig), sqsmsg.AttrReplayCount: str("Number", n)})
	}
	a := h.decide(withOrig("dlq-id-1", "orig", "1"), 0.5, time.Now()).entry
	b := h.decide(withOrig("dlq-id-2", "orig", "1"), 0.9, time.Now()).entry
	c := h.decide(withOrig("dlq-id-1", "orig", "2"), 0.5, time.Now()).entry
	d := h.decide(withOrig("dlq-id-1", "other", "1"), 0.5, time.Now()).entry
	retried := h.decide(withOrig("dlq-id-1", "orig", "1"), 0.9, time.Now()).entry
	if a.DeduplicationID != retried.DeduplicationID {
		t.Errorf("a retried send of one DLQ record got ids %q and %q: it would be delivered twice", a.DeduplicationID, retried.DeduplicationID)
	}
	for name, other := range map[string]sqsmsg.Entry{"after a counter reset": b, "next replay": c, "other message": d} {
		if other.DeduplicationID == a.DeduplicationID {
			t.Errorf("%s shares dedup id %q with the first replay: SQS would drop it", name, a.DeduplicationID)
		}
	}
	if a.DelaySeconds != 0 || a.GroupID != "g" || len(a.DeduplicationID) > 128 {
		t.Errorf("FIFO entry %+v", a)
	}
}
