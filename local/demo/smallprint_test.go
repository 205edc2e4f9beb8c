//go:build integration

package demo

import (
	"errors"
	"maps"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/internal/local/localesm"
)

// TestRecordsAddUpToDeliveries delivers records with every answer the
// processor gives, and two it cannot give in time (an invocation abandoned
// at its timeout, one that failed as a whole), and checks that each
// delivery is on exactly one line of the report's "records" block: the
// lines add up to the deliveries the block's first line names.
func TestRecordsAddUpToDeliveries(t *testing.T) {
	t.Parallel()
	tr := NewTracker()
	answer := func(req, id, outcome string) {
		tr.Outcome(Answer{RequestID: req, MessageID: id, Outcome: outcome})
	}
	records := func(ids ...string) []events.SQSMessage {
		out := make([]events.SQSMessage, len(ids))
		for i, id := range ids {
			out[i] = events.SQSMessage{MessageId: id, Attributes: map[string]string{"ApproximateReceiveCount": "1"}}
		}
		return out
	}
	answers := map[string]string{
		"m1": outcomeProcessed, "m2": outcomeUnrecorded, "m3": outcomeDuplicate, "m4": outcomeInProgress,
		"m5": outcomeFailed, "m6": outcomeNotStarted, "m7": "payload-mismatch", "m8": "no-key",
	}
	for id, o := range answers {
		answer("a", id, o)
	}
	answer("a", "m5", outcomeFailed) // a failure's second line: its lock was not released
	tr.MainInvocation(localesm.Invocation{RequestID: "a", Records: records("m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8"), Deleted: []string{"m1", "m2", "m3"}})
	answer("b", "m9", outcomeProcessed)
	tr.MainInvocation(localesm.Invocation{RequestID: "b", Records: records("m9", "m10"), Err: localesm.ErrTimeout})
	answer("b", "m10", outcomeFailed) // after the timeout: nothing SQS sees
	tr.MainInvocation(localesm.Invocation{RequestID: "c", Records: records("m11"), Err: errors.New("invalid configuration")})
	tr.InProgressHidden(1)

	sc := newScenario(t)
	obs := tr.Snapshot()
	before := sc.obs.Deliveries
	maps.Copy(sc.obs.Receipts, obs.Receipts)
	sc.obs.Deliveries += obs.Deliveries
	sc.obs.InProgressHidden = obs.InProgressHidden
	s := sc.summarize()

	r := s.Records
	if r.Unrecorded != 1 || r.InProgress != 1 || r.Failed != 1 || r.NotStarted != 1 || r.TimedOut != 1 || r.NoAnswer != 1 ||
		!maps.Equal(r.Other, map[string]int{"payload-mismatch": 1, "no-key": 1}) || r.InProgressHidden != 1 {
		t.Errorf("records %+v", r)
	}
	if obs.Deliveries != 11 || r.Total() != s.Deliveries || s.Deliveries != before+11 {
		t.Errorf("records add up to %d, %d delivered (%d here)", r.Total(), s.Deliveries, obs.Deliveries)
	}
	text := s.Render()
	header, lines := recordsBlock(t, text)
	if header != s.Deliveries {
		t.Errorf("records block names %d deliveries, want %d:\n%s", header, s.Deliveries, text)
	}
	sum := 0
	for label, n := range lines {
		sum += n
		if label == "hidden" {
			t.Errorf("hidden, a part of in progress, is counted as a line of its own")
		}
	}
	if sum != s.Deliveries {
		t.Errorf("the records lines %v add up to %d, not the %d deliveries:\n%s", lines, sum, s.Deliveries, text)
	}
	for _, label := range []string{"processed", "duplicate", "in progress", "failed", "not started", "timed out", "no answer", "other"} {
		if _, ok := lines[label]; !ok {
			t.Errorf("records block lacks %q:\n%s", label, text)
		}
	}
	if strings.Contains(text, "add up to") {
		t.Errorf("report says its own counts disagree:\n%s", text)
	}
}

// recordsBlock reads the report's "records" block: the number of
// deliveries its first line names, and each line one level under it by
// label (the label column is 22 characters wide).
func recordsBlock(t *testing.T, text string) (int, map[string]int) {
	t.Helper()
	lines := map[string]int{}
	header := -1
	for line := range strings.Lines(text) {
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "records "):
			header = leadingInt(t, line[22:])
		case header < 0:
		case strings.HasPrefix(line, "  ") && line[2] != ' ':
			lines[strings.TrimSpace(line[:22])] = leadingInt(t, line[22:])
		case strings.HasPrefix(line, "    "):
		default:
			return header, lines
		}
	}
	t.Fatalf("no records block in:\n%s", text)
	return 0, nil
}

func leadingInt(t *testing.T, s string) int {
	t.Helper()
	digits := s[:len(s)-len(strings.TrimLeft(s, "0123456789"))]
	n, err := strconv.Atoi(digits)
	if err != nil {
		t.Fatalf("no number at the start of %q", s)
	}
	return n
}

// smallPrintCases are finished runs of each mode: a clean local run with
// dead letters, replays and a timed-out invocation; a run that gave up; a
// -target sqs run; a -stack run.
func smallPrintCases(t *testing.T) map[string]Summary {
	t.Helper()
	clean := newScenario(t)
	clean.obs.DeadLettered = 3
	clean.obs.Replays = []Replay{{Send: "x", Attempt: 1, Delay: 1}}
	clean.obs.Invocations["req-timed-out"] = InvocationInfo{Started: t0, Abandoned: true}
	clean.obs.Elapsed = 46_650_001 * time.Microsecond
	gaveUp := newScenario(t)
	for _, snd := range gaveUp.w.Sends[:2] {
		delete(gaveUp.obs.Acked, snd.ID)
		delete(gaveUp.obs.Operator, snd.ID)
	}
	cases := map[string]Summary{
		"local":   clean.summarize(),
		"gave up": gaveUp.summarize(),
		"target":  newTargetScenario(t).summarize(),
		"stack": {
			Mode: "stack", OK: true, RunID: "r", Sent: 12, UniqueKeys: 10, Resolved: 11, Processed: 9, DurationSeconds: 61.25,
			Operator: OpStats{Total: 2, ByReason: map[string]int{"max-attempts": 2}}, LeftInQueues: map[string]int{},
		},
	}
	for name, s := range cases {
		// What moto_server differs in is in -json, never on the screen.
		s.Adaptations = []string{"alarms not created"}
		cases[name] = s
	}
	return cases
}

// TestLastProgressLineIsTheReport: every number of the last progress line
// is one the report prints under the same name.
func TestLastProgressLineIsTheReport(t *testing.T) {
	t.Parallel()
	for name, s := range smallPrintCases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			line, report := s.Progress().Line(), s.Render()
			elapsed, items, ok := strings.Cut(line, "] ")
			if !ok {
				t.Fatalf("line %q has no elapsed time", line)
			}
			has := func(re string) {
				t.Helper()
				if !regexp.MustCompile(`(?m)` + re).MatchString(report) {
					t.Errorf("line %q: the report has no line matching %s:\n%s", line, re, report)
				}
			}
			has(regexp.QuoteMeta(", " + strings.TrimSpace(strings.Trim(elapsed, "[s")) + " s: "))
			for item := range strings.SplitSeq(items, " · ") {
				n, label, _ := strings.Cut(item, " ")
				switch label {
				case "messages done", "message done":
					done, sent, _ := strings.Cut(n, "/")
					has(`^sent +` + sent + ` messages? for`)
					if done != sent {
						has(`^done +` + done + ` of ` + sent + ` messages? `)
					} else if strings.Contains(report, "\ndone ") {
						t.Errorf("line %q: every message done, yet the report has a done line:\n%s", line, report)
					}
				case "processed":
					has(`^  processed +` + n + ` `)
				case "forwarded":
					has(`^forwarded +` + n + ` `)
				case "completed":
					has(`^completed keys +` + n + ` `)
				case "duplicates suppressed", "duplicate suppressed":
					if s.Target != nil {
						has(`^duplicates suppressed ` + n + ` `)
					} else {
						has(`^  duplicate +` + n + ` `)
					}
				case "dead-lettered":
					has(`^dead-lettered +` + n + ` `)
				case "replays", "replay":
					has(`^replays +` + n + ` `)
				case "at operator":
					has(`^operator queue +` + n + ` `)
				case "timed out":
					has(`^  timed out +` + n + `:`)
				default:
					t.Errorf("line %q: %q is no count the report has", line, item)
				}
			}
		})
	}
}

// TestReportSpeaksPlainly: the terminal output (report and progress line)
// has no Markdown, counts one thing in the singular, and its header names
// what ran without moto_server's internals.
func TestReportSpeaksPlainly(t *testing.T) {
	t.Parallel()
	one := regexp.MustCompile(`(^|[^\d.,/])1 (messages|keys|records|invocations|copies|replays|duplicates|faults|attempts|side effects|crashes|mappings|invariants|notes)\b`)
	for name, s := range smallPrintCases(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, text := range []string{s.Render(), s.Progress().Line()} {
				if strings.ContainsRune(text, '`') {
					t.Errorf("Markdown backticks on the terminal:\n%s", text)
				}
				for _, internal := range []string{"adaptation", "samstack", "differs from CloudFormation"} {
					if strings.Contains(text, internal) {
						t.Errorf("%q on the terminal: moto_server's differences belong in -json and the docs:\n%s", internal, text)
					}
				}
				if m := one.FindString(text); m != "" {
					t.Errorf("%q: one thing in the plural:\n%s", m, text)
				}
			}
		})
	}
	for n, want := range map[int]string{0: "0 extra copies", 1: "1 extra copy", 2: "2 extra copies"} {
		if got := count(n, "extra copy"); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
	for noun, want := range map[string]string{"replay": "replays", "key": "keys", "delivery": "deliveries", "crash": "crashes", "AWS call": "AWS calls"} {
		if got := plural(2, noun); got != want {
			t.Errorf("plural(2, %q) = %q, want %q", noun, got, want)
		}
	}
}
