package replay

// Fuzz targets of what the replayer reads from outside: a dead letter's
// attributes (the replay counter, the first enqueue, the original id) and
// its environment configuration. Plain `go test` runs the seeds and
// testdata/fuzz; `make fuzz` searches further.

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/jitter"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
)

// refCount is the replay counter as documented, read independently of
// replayCount: absent is 0; a String or Number attribute (any custom
// suffix) whose value is decimal digits only, at most 2^31-1; anything else
// is invalid.
func refCount(a events.SQSMessageAttribute, present bool) (int, bool) {
	if !present {
		return 0, true
	}
	base := a.DataType
	if i := strings.IndexByte(base, '.'); i >= 0 {
		base = base[:i]
	}
	if (base != "String" && base != "Number") || a.StringValue == nil {
		return 0, false
	}
	s := *a.StringValue
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > math.MaxInt32 {
		return 0, false
	}
	return int(n), true
}

// FuzzReplayDecide decides a dead letter with fuzzed attributes and checks
// the counter: a garbage one sends the record, as it arrived, to the
// operator queue as invalid-counter; a valid one is replay prev+1, and goes
// up by exactly one on the replay sent (its data type kept), stays at prev
// on a forward, never goes down or wraps. The replay keeps the original id
// and the first enqueue the record carries, stays within SQS's limits and
// delays, and the same record decided twice is decided the same way.
func FuzzReplayDecide(f *testing.F) {
	f.Add("2", "Number", true, "1767225600000", "Number", "1767225600000", "", uint8(0), uint32(0), uint16(3), false, 0.5, "", int64(1_767_225_660_000), uint32(0))
	f.Add("0", "String", true, "", "", "", "orig-1", uint8(0), uint32(0), uint16(3), false, 0.0, "", int64(1_767_225_660_000), uint32(3600))
	f.Add("3", "Number", true, "", "", "", "", uint8(0), uint32(0), uint16(3), false, 0.99, "", int64(1_767_225_660_000), uint32(0))
	f.Add("2147483647", "Number.int", true, "", "", "", "", uint8(0), uint32(0), uint16(1000), false, 0.5, "", int64(1_767_225_660_000), uint32(0))
	f.Add("2147483648", "Number", true, "", "", "", "", uint8(0), uint32(0), uint16(1000), false, 0.5, "", int64(1_767_225_660_000), uint32(0))
	f.Add("-1", "Number", true, "", "", "", "", uint8(0), uint32(0), uint16(3), false, 0.5, "", int64(1_767_225_660_000), uint32(0))
	f.Add("1.0", "Number", true, "", "", "", "", uint8(0), uint32(0), uint16(3), false, 0.5, "", int64(1_767_225_660_000), uint32(0))
	f.Add(" 1", "Number", true, "", "", "", "", uint8(0), uint32(0), uint16(3), false, 0.5, "", int64(1_767_225_660_000), uint32(0))
	f.Add("+1", "Number", true, "", "", "", "", uint8(0), uint32(0), uint16(3), false, 0.5, "", int64(1_767_225_660_000), uint32(0))
	f.Add("1", "Binary", true, "", "", "", "", uint8(0), uint32(0), uint16(3), false, 0.5, "", int64(1_767_225_660_000), uint32(0))
	f.Add("007", "String.padded", true, "yesterday", "Number", "0", "", uint8(0), uint32(0), uint16(3), false, 0.5, "", int64(1_767_225_660_000), uint32(0))
	f.Add("1", "Number", true, "", "", "1767225600000", "", uint8(0), uint32(0), uint16(3), true, 0.5, "g", int64(1_767_225_601_000), uint32(0))
	f.Add("1", "Number", true, "", "", "1767225600000", "", uint8(0), uint32(0), uint16(3), true, 0.5, "", int64(1_767_225_601_000), uint32(0))
	f.Add("", "", false, "", "", "", "", uint8(8), uint32(0), uint16(3), false, 0.5, "", int64(1_767_225_660_000), uint32(0))
	f.Add("", "", false, "", "", "", "", uint8(10), uint32(0), uint16(3), false, 0.5, "", int64(1_767_225_660_000), uint32(0))
	f.Add("1", "Number", true, "", "", "", "", uint8(0), uint32(sqsmsg.MaxMessageBytes-60), uint16(3), false, 0.5, "", int64(1_767_225_660_000), uint32(0))
	f.Fuzz(func(t *testing.T, counter, counterType string, hasCounter bool, first, firstType, sentTS, origID string,
		extra uint8, pad uint32, maxAttempts uint16, fifo bool, r float64, group string, nowMs int64, maxAge uint32) {
		attrs := map[string]events.SQSMessageAttribute{}
		for i := range int(extra % 12) {
			attrs["a"+strconv.Itoa(i)] = str("String", "v"+strconv.Itoa(i))
		}
		if hasCounter {
			attrs[sqsmsg.AttrReplayCount] = str(counterType, counter)
		}
		if firstType != "" {
			attrs[sqsmsg.AttrFirstSent] = str(firstType, first)
		}
		if origID != "" {
			attrs[sqsmsg.AttrOriginalMessageID] = str("String", origID)
		}
		rec := record("dlq-1", "body"+strings.Repeat("x", int(pad%(sqsmsg.MaxMessageBytes+64))), attrs)
		rec.Attributes["SentTimestamp"] = sentTS
		rec.EventSourceARN = "arn:aws:sqs:us-east-1:123456789012:dlq"
		mainQ := mainURL
		if fifo {
			mainQ += ".fifo"
			rec.EventSourceARN += ".fifo"
			if group != "" {
				rec.Attributes["MessageGroupId"] = group
			}
		}
		if !(r >= 0 && r < 1) {
			r = 0.5
		}
		cfg := Config{MainQueueURL: mainQ, OperatorQueueURL: opURL, MaxAttempts: int(maxAttempts % 1001),
			Backoff:       jitter.Policy{Base: 2 * time.Second, Rate: 2, Cap: MaxDelay, Strategy: jitter.Full},
			MaxMessageAge: time.Duration(maxAge%uint32(MaxMessageAgeLimit/time.Second)) * time.Second}
		h := New(cfg, Deps{})
		now := time.UnixMilli(nowMs)
		d := h.decide(rec, r, now)
		if again := h.decide(rec, r, now); !decisionsEqual(d, again) {
			t.Fatalf("the same record decided twice: to %s as %q (replay %d), then to %s as %q (replay %d)", d.queue, d.reason, d.n, again.queue, again.reason, again.n)
		}

		prev, valid := refCount(attrs[sqsmsg.AttrReplayCount], hasCounter)
		sentCounter, sentHas := d.entry.Attributes[sqsmsg.AttrReplayCount]
		reason := aws.ToString(d.entry.Attributes[sqsmsg.AttrReason].StringValue)
		// The reason attribute is on every forward with room for it.
		roomForReason := len(d.entry.Attributes) < sqsmsg.MaxAttributes &&
			d.entry.Size()+len(sqsmsg.AttrReason)+len("String")+len(d.reason) <= sqsmsg.MaxMessageBytes
		if d.queue == opURL && reason != d.reason && roomForReason {
			t.Fatalf("forwarded as %q without its reason attribute, with room for it", d.reason)
		}
		if !valid {
			if d.queue != opURL || d.reason != ReasonInvalidCounter || d.n != 0 {
				t.Fatalf("garbage counter %q (%s): to %s as %q (replay %d), want the operator queue with reason %s",
					counter, counterType, d.queue, d.reason, d.n, ReasonInvalidCounter)
			}
			if !sentHas || aws.ToString(sentCounter.DataType) != counterType || aws.ToString(sentCounter.StringValue) != counter {
				t.Fatalf("garbage counter %q (%s) forwarded as %s, not as it arrived", counter, counterType, show(sentCounter))
			}
			return
		}
		if d.n != prev+1 || d.n <= prev {
			t.Fatalf("counter %d: replay %d", prev, d.n)
		}
		if d.action == hold {
			if !fifo || d.holdFor <= 0 || d.holdFor > MaxDelay {
				t.Fatalf("held for %v (FIFO: %t)", d.holdFor, fifo)
			}
			return
		}
		if d.action != send {
			t.Fatalf("action %v for a lone record", d.action)
		}
		// A record SQS delivered is within its limits; one the fuzzer made
		// over them can only be sent on as it is.
		if d.entry.Size() > max(sqsmsg.MaxMessageBytes, sqsmsg.FromRecord(rec).Size()) || len(d.entry.Attributes) > max(sqsmsg.MaxAttributes, len(attrs)) {
			t.Fatalf("entry of %d bytes, %d attributes", d.entry.Size(), len(d.entry.Attributes))
		}
		wantOrig, ok := sqsmsg.OriginalMessageID(rec)
		if !ok {
			wantOrig = rec.MessageId
		}
		if fa, carried := attrs[sqsmsg.AttrFirstSent]; carried {
			if got := d.entry.Attributes[sqsmsg.AttrFirstSent]; aws.ToString(got.DataType) != fa.DataType || aws.ToString(got.StringValue) != *fa.StringValue {
				t.Fatalf("first-sent %s %q sent on as %s", fa.DataType, *fa.StringValue, show(got))
			}
		}
		switch d.queue {
		case mainQ:
			if d.reason != "" || reason != "" && attrs[sqsmsg.AttrReason].StringValue == nil {
				t.Fatalf("a replay with reason %q", d.reason)
			}
			n, ok := refCount(eventAttr(sentCounter), sentHas)
			if !ok || n != prev+1 {
				t.Fatalf("counter %d replayed as %s", prev, show(sentCounter))
			}
			if hasCounter && aws.ToString(sentCounter.DataType) != counterType || !hasCounter && aws.ToString(sentCounter.DataType) != "Number" {
				t.Fatalf("counter of type %q replayed as type %q", counterType, aws.ToString(sentCounter.DataType))
			}
			if got := sqsmsg.AttributeText(eventAttr(d.entry.Attributes[sqsmsg.AttrOriginalMessageID])); got != wantOrig {
				t.Fatalf("original id %q replayed as %q", wantOrig, got)
			}
			if d.entry.DelaySeconds < 0 || d.entry.DelaySeconds > int32(MaxDelay/time.Second) || fifo && d.entry.DelaySeconds != 0 {
				t.Fatalf("DelaySeconds %d", d.entry.DelaySeconds)
			}
			if fifo && (d.entry.GroupID != group || len(d.entry.DeduplicationID) != 64) {
				t.Fatalf("FIFO replay with group %q, deduplication id %q", d.entry.GroupID, d.entry.DeduplicationID)
			}
		case opURL:
			want := map[string]bool{
				ReasonMaxAttempts:    d.n > cfg.MaxAttempts,
				ReasonMissingGroupID: fifo && group == "",
				ReasonExpired:        cfg.MaxMessageAge > 0,
				ReasonAttributeLimit: true,
			}
			if !want[d.reason] {
				t.Fatalf("forwarded with reason %q (replay %d of %d, FIFO %t, group %q)", d.reason, d.n, cfg.MaxAttempts, fifo, group)
			}
			if (d.reason == ReasonMaxAttempts) != (d.n > cfg.MaxAttempts) {
				t.Fatalf("replay %d of at most %d forwarded as %q", d.n, cfg.MaxAttempts, d.reason)
			}
			if sentHas {
				if n, ok := refCount(eventAttr(sentCounter), true); !ok || n != prev {
					t.Fatalf("counter %d forwarded as %s", prev, show(sentCounter))
				}
			}
		default:
			t.Fatalf("sent to %q", d.queue)
		}
	})
}

// show is an attribute's type and text, for a message.
func show(v sqstypes.MessageAttributeValue) string {
	return aws.ToString(v.DataType) + " " + strconv.Quote(sqsmsg.AttributeText(eventAttr(v)))
}

// eventAttr is an attribute to send as a record would carry it.
func eventAttr(v sqstypes.MessageAttributeValue) events.SQSMessageAttribute {
	return events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue, BinaryValue: v.BinaryValue}
}

func decisionsEqual(a, b decision) bool {
	return a.action == b.action && a.queue == b.queue && a.n == b.n && a.reason == b.reason && a.delay == b.delay &&
		a.holdFor == b.holdFor && a.firstSent.Equal(b.firstSent) && a.unstamped == b.unstamped &&
		a.entry.Size() == b.entry.Size() && a.entry.DelaySeconds == b.entry.DelaySeconds &&
		a.entry.DeduplicationID == b.entry.DeduplicationID && a.entry.GroupID == b.entry.GroupID
}

// replayVars are the variables LoadConfig reads, in FuzzLoadConfig's
// argument order.
var replayVars = []string{"MAIN_QUEUE_URL", "OPERATOR_QUEUE_URL", "MAX_ATTEMPTS", "BACKOFF_BASE", "BACKOFF_RATE", "MAX_DELAY", "MAX_MESSAGE_AGE", "JITTER"}

// FuzzLoadConfig reads arbitrary values (unset where the mask's bit is
// set): never a panic; a refusal names only the variables read; an
// accepted configuration is within its documented ranges, and its backoff
// never draws a delay SQS would refuse.
func FuzzLoadConfig(f *testing.F) {
	main, op := mainURL, opURL
	f.Add(uint8(0), main, op, "3", "2", "2", "900", "0", "full")
	f.Add(uint8(0), main, main, "1001", "-1", "0.5", "901", "1209601", "sometimes")
	f.Add(uint8(0), main+".fifo", op+".fifo", "0", "0.001", "1000", "0", "1209600", " Decorrelated ")
	f.Add(uint8(0), "sqs", "", "3.0", "NaN", "Inf", "1e3", "-0", "none")
	f.Add(uint8(0), main, op, "+3", "0x1p3", "1e-400", "0900", "  ", "EQUAL")
	f.Add(uint8(0xff), "", "", "", "", "", "", "", "")
	f.Fuzz(func(t *testing.T, unset uint8, mainV, opV, attempts, base, rate, maxDelay, maxAge, jit string) {
		values := []string{mainV, opV, attempts, base, rate, maxDelay, maxAge, jit}
		env := map[string]string{}
		for i, name := range replayVars {
			if unset&(1<<i) == 0 {
				env[name] = values[i]
			}
		}
		c, err := LoadConfig(envconfig.Map(env))
		if err != nil {
			for _, e := range unjoin(err) {
				var ve *envconfig.VarError
				if !errors.As(e, &ve) || !slices.Contains(replayVars, ve.Name) {
					t.Fatalf("error %q names no variable LoadConfig reads", e)
				}
			}
			return
		}
		if c.MainQueueURL == "" || c.OperatorQueueURL == "" || c.MainQueueURL == c.OperatorQueueURL ||
			c.MaxAttempts < 0 || c.MaxAttempts > 1000 ||
			c.Backoff.Base < 0 || c.Backoff.Base > MaxDelay || !(c.Backoff.Rate >= 1 && c.Backoff.Rate <= 1000) ||
			c.Backoff.Cap < 0 || c.Backoff.Cap > MaxDelay || c.Backoff.Cap%time.Second != 0 ||
			c.MaxMessageAge < 0 || c.MaxMessageAge > MaxMessageAgeLimit || !slices.Contains(jitter.Strategies, c.Backoff.Strategy) {
			t.Fatalf("accepted %q as %+v", env, c)
		}
		for _, n := range []int{1, 2, c.MaxAttempts, 1000} {
			for _, r := range []float64{0, 0.5, 0.999999} {
				if d := roundSeconds(c.Backoff.Delay(n, r)); d < 0 || d > MaxDelay {
					t.Fatalf("replay %d draws %v with %+v", n, d, c.Backoff)
				}
			}
		}
	})
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var all []error
		for _, e := range j.Unwrap() {
			all = append(all, unjoin(e)...)
		}
		return all
	}
	return []error{err}
}
