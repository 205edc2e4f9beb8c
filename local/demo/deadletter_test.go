//go:build integration

package demo

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/internal/local/localesm"
	"github.com/sqs-once/sqs-once/internal/metrics"
	"github.com/sqs-once/sqs-once/sqsonce"
)

// sendOfKind is the first send of a key of kind.
func (sc *scenario) sendOfKind(kind Kind) Send {
	keys := sc.w.KeyIndex()
	for _, s := range sc.w.Sends {
		if keys[s.Key].Kind == kind {
			return s
		}
	}
	panic("no send of kind " + kind)
}

// deadLetter has message id of send s go through the DLQ after the
// processor answered its receives as given (receive n is answers[n-1]; ""
// is a receive that never reached the processor).
func (sc *scenario) deadLetter(s Send, id string, answers ...string) {
	if sc.obs.DeadLetters == nil {
		sc.obs.DeadLetters = map[string][]string{}
	}
	sc.obs.DeadLetters[s.ID] = append(sc.obs.DeadLetters[s.ID], id)
	for n, a := range answers {
		if a != "" {
			sc.obs.Receipts[id] = append(sc.obs.Receipts[id], Receipt{Receive: n + 1, RequestID: id + "-" + a, Outcome: a})
			sc.obs.Deliveries++
		}
	}
}

// TestSummarizeCountsHealthyDeadLettered: a send of a normal key (a crashing
// one too) that went through the DLQ counts once however many trips it
// made; the poison and transient keys, which the workload makes fail on
// purpose, never count. Without -chaos and with the demo's retry budget the
// run fails, naming the sends and the processor's answer to each receive.
func TestSummarizeCountsHealthyDeadLettered(t *testing.T) {
	t.Parallel()
	sc := newScenario(t)
	// A transient key, made of a normal one: its dead letters are built in.
	transient := sc.normalSend(1)
	for i := range sc.w.Keys {
		if sc.w.Keys[i].ID == transient.Key {
			sc.w.Keys[i].Kind, sc.w.Keys[i].Failures = Transient, 3
		}
	}
	sc.deadLetter(transient, "mt", "failed", "failed", "failed")
	sc.deadLetter(sc.sendOfKind(Poison), "mp1", "failed", "failed", "failed")
	sc.deadLetter(sc.sendOfKind(Poison), "mp2", "failed", "failed", "failed")
	if h := sc.summarize().HealthyDeadLettered; h == nil || h.Count != 0 || h.FailsRun || len(h.Messages) != 0 {
		t.Fatalf("poison and transient dead letters counted as healthy: %+v", h)
	}

	healthy := sc.normalSend(2)
	sc.deadLetter(healthy, "m1", "in-progress", "in-progress", "")
	sc.deadLetter(healthy, "m2", "in-progress", "not-started", "in-progress") // its replay went too
	s := sc.summarize()
	h := s.HealthyDeadLettered
	if h.Count != 1 || h.Keys != 1 || !h.FailsRun || h.Target != 0 || len(h.Messages) != 1 || len(h.Messages[0].Trips) != 2 || h.Messages[0].Send != healthy.ID {
		t.Fatalf("healthy dead-lettered %+v, want one send of one key, two trips, failing the run", h)
	}
	if s.OK || !strings.Contains(strings.Join(s.Violations, "\n"), "1 message of 1 key whose handler succeeds went through the dead-letter queue (target 0), with no fault injected") ||
		!strings.Contains(strings.Join(s.Violations, "\n"), healthy.ID+" ("+healthy.Key+")") {
		t.Errorf("OK %v, violations %v: want the run failed, naming %s", s.OK, s.Violations, healthy.ID)
	}
	text := s.Render()
	for _, want := range []string{
		"healthy             1 of them of keys whose handler succeeds (normal keys, crashing ones included); target 0  [FAIL]",
		healthy.ID + ", message m1: receive 1 in-progress, receive 2 in-progress, receive 3 never reached the processor",
		healthy.ID + ", message m2: receive 1 in-progress, receive 2 not-started, receive 3 in-progress",
		"verdict: FAILED",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}

	// A crashing key is healthy: its dead holder's lock is what the hiding
	// of in-progress records is for.
	crashing := sc.normalSend(1)
	for i := range sc.w.Keys {
		if sc.w.Keys[i].ID == crashing.Key {
			sc.w.Keys[i].Crash = true
		}
	}
	sc.deadLetter(crashing, "mc", "processed", "in-progress", "in-progress")
	if h := sc.summarize().HealthyDeadLettered; h.Count != 2 || h.Keys != 2 {
		t.Errorf("with a crashing key's dead letter: %d messages of %d keys, want 2 of 2", h.Count, h.Keys)
	}
}

// TestHealthyDeadLetteredUnderChaosIsAFinding: under -chaos, or with a
// retry budget the flags chose, a healthy message dead-lettered is stated
// in the report and the verdict line, but does not fail the run.
func TestHealthyDeadLetteredUnderChaosIsAFinding(t *testing.T) {
	t.Parallel()
	for name, set := range map[string]func(*scenario){
		"chaos":   func(sc *scenario) { sc.obs.Chaos = &ChaosStats{Level: ChaosHeavy, Faults: map[string]int{}} },
		"retries": func(sc *scenario) { sc.ev.RetriesOverride = true },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sc := newScenario(t)
			set(sc)
			if s := sc.summarize(); !s.OK || s.HealthyDeadLettered.Count != 0 || s.HealthyDeadLettered.Finding != "" || strings.Contains(s.Render(), "finding:") {
				t.Fatalf("clean run: OK %v, %+v", s.OK, s.HealthyDeadLettered)
			}
			healthy := sc.normalSend(1)
			sc.deadLetter(healthy, "m1", "in-progress", "", "in-progress")
			s := sc.summarize()
			h := s.HealthyDeadLettered
			if !s.OK || h.Count != 1 || h.FailsRun || !strings.Contains(h.Finding, "1 message of 1 key whose handler succeeds went through the dead-letter queue (target 0). Not a failed run") {
				t.Fatalf("OK %v, violations %v, %+v: want an OK run with the finding", s.OK, s.Violations, h)
			}
			text := s.Render()
			for _, want := range []string{
				"target 0  [finding, see below]",
				"finding: " + h.Finding,
				"receive 1 in-progress, receive 2 never reached the processor, receive 3 in-progress",
				"nothing lost; but 1 healthy message went through the dead-letter queue (target 0): a finding, see above",
			} {
				if !strings.Contains(text, want) {
					t.Errorf("report lacks %q:\n%s", want, text)
				}
			}
		})
	}
}

// TestHealthyDeadLetteredInTheJSONSummary: -json carries the count with its
// target, 0 included, and each message with its receives.
func TestHealthyDeadLetteredInTheJSONSummary(t *testing.T) {
	t.Parallel()
	sc := newScenario(t)
	var m struct {
		Healthy *HealthyDeadLettered `json:"healthyDeadLettered"`
		Records map[string]int       `json:"records"`
	}
	decode := func() {
		t.Helper()
		raw, err := json.Marshal(sc.summarize())
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
	}
	sc.obs.InProgressHidden = 4
	decode()
	if m.Healthy == nil || m.Healthy.Count != 0 || m.Healthy.Messages == nil {
		t.Errorf("clean run's healthyDeadLettered %+v: want count 0 and messages []", m.Healthy)
	}
	if n, ok := m.Records["inProgressHidden"]; !ok || n != 4 {
		t.Errorf("records %v: want inProgressHidden 4", m.Records)
	}
	healthy := sc.normalSend(1)
	sc.deadLetter(healthy, "m1", "in-progress", "in-progress", "in-progress")
	decode()
	if m.Healthy.Count != 1 || len(m.Healthy.Messages) != 1 || len(m.Healthy.Messages[0].Trips[0].Receipts) != 3 || m.Healthy.Messages[0].Trips[0].MessageID != "m1" {
		t.Errorf("healthyDeadLettered %+v", m.Healthy)
	}
}

// TestSummarizeTargetCountsHealthyDeadLettered: with a target every key is
// healthy (no handler makes any fail), and the count is made the same way.
func TestSummarizeTargetCountsHealthyDeadLettered(t *testing.T) {
	t.Parallel()
	sc := newTargetScenario(t)
	if s := sc.summarize(); s.HealthyDeadLettered == nil || s.HealthyDeadLettered.Count != 0 || !strings.Contains(s.Render(), "target 0  [ok]") {
		t.Fatalf("clean target run: %+v\n%s", s.HealthyDeadLettered, s.Render())
	}
	snd := sc.firstSend()
	sc.obs.DeadLetters = map[string][]string{snd.ID: {"m1"}}
	s := sc.summarize()
	if s.OK || s.HealthyDeadLettered.Count != 1 || !strings.Contains(strings.Join(s.Violations, "\n"), snd.ID) {
		t.Errorf("OK %v, %+v, violations %v: want the send counted and the run failed", s.OK, s.HealthyDeadLettered, s.Violations)
	}
}

// TestTrackerFollowsMessagesThroughTheDLQ: the replayer's records name the
// sends that went through the DLQ (a record received twice is one trip, a
// message of no send of this run none), and each main-queue delivery keeps
// its receive number, invocation and the processor's answer.
func TestTrackerFollowsMessagesThroughTheDLQ(t *testing.T) {
	t.Parallel()
	w, err := NewWorkload(WorkloadSpec{Keys: 2, MaxReceiveCount: 3}, 1, "r")
	if err != nil {
		t.Fatal(err)
	}
	snd := w.Sends[0]
	rec := func(id, receive string) events.SQSMessage {
		return events.SQSMessage{MessageId: id, Body: w.Body(snd, Normal, false), Attributes: map[string]string{"ApproximateReceiveCount": receive}}
	}
	tr := NewTracker()
	tr.Outcome(Answer{RequestID: "a", MessageID: "m1", Outcome: outcomeInProgress})
	tr.MainInvocation(localesm.Invocation{RequestID: "a", Records: []events.SQSMessage{rec("m1", "1")}, Left: []string{"m1"}})
	tr.MainInvocation(localesm.Invocation{RequestID: "b", Records: []events.SQSMessage{rec("m1", "2")}, Err: localesm.ErrTimeout})
	tr.Outcome(Answer{RequestID: "c", MessageID: "m1", Outcome: "failed"})
	tr.Outcome(Answer{RequestID: "c", MessageID: "m1", Outcome: "failed"})
	tr.MainInvocation(localesm.Invocation{RequestID: "c", Records: []events.SQSMessage{rec("m1", "3")}, Left: []string{"m1"}})
	tr.Outcome(Answer{RequestID: "d", MessageID: "m2", Outcome: outcomeDuplicate})
	tr.MainInvocation(localesm.Invocation{RequestID: "d", Records: []events.SQSMessage{rec("m2", "1")}, Deleted: []string{"m2"}})
	tr.DeadLetterInvocation(localesm.Invocation{Records: []events.SQSMessage{rec("m1", "1")}})
	tr.DeadLetterInvocation(localesm.Invocation{Records: []events.SQSMessage{rec("m1", "2"), {MessageId: "other", Body: "{}"}}})
	tr.InProgressHidden(2)
	tr.InProgressHidden(1)
	obs := tr.Snapshot()
	if obs.DeadLettered != 2 || len(obs.DeadLetters) != 1 || len(obs.DeadLetters[snd.ID]) != 1 || obs.DeadLetters[snd.ID][0] != "m1" {
		t.Errorf("dead-lettered %d, by send %v: want 2 messages, m1 the one of %s", obs.DeadLettered, obs.DeadLetters, snd.ID)
	}
	want := []Receipt{
		{Receive: 1, RequestID: "a", Outcome: outcomeInProgress},
		{Receive: 2, RequestID: "b", Abandoned: true},
		{Receive: 3, RequestID: "c", Outcome: "failed"},
	}
	if got := obs.Receipts["m1"]; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("receipts of m1 %+v, want %+v", got, want)
	}
	if got := obs.Receipts["m2"]; len(got) != 1 || got[0] != (Receipt{Receive: 1, RequestID: "d", Outcome: outcomeDuplicate, Deleted: true}) {
		t.Errorf("receipts of m2 %+v", got)
	}
	r := recordStats(obs.Receipts)
	if r.InProgress != 1 || r.Duplicate != 1 || r.Failed != 1 || r.TimedOut != 1 || r.Total() != obs.Deliveries || obs.InProgressHidden != 3 {
		t.Errorf("records %+v of %d deliveries, hidden %d: want in-progress, duplicate, failed (its two lines once) and timed out once each, 3 hidden",
			r, obs.Deliveries, obs.InProgressHidden)
	}
}

// TestProcessorMetricsCountInProgressHidden: the processor's metrics writer
// adds up InProgressHidden from the EMF documents the processor writes,
// and nothing else; a line that is not EMF is an error, which the
// processor logs.
func TestProcessorMetricsCountInProgressHidden(t *testing.T) {
	t.Parallel()
	hidden := 0
	m := processorMetrics{hidden: func(n int) { hidden += n }}
	write := func(counts map[string]int) {
		t.Helper()
		s := metrics.NewSet(metrics.Dimension{Name: metrics.DimensionFunction, Value: "processor"})
		for name, n := range counts {
			s.Count(name, n)
		}
		s.Count(string(sqsonce.KindFailed), 2, metrics.Dimension{Name: metrics.DimensionReason, Value: string(sqsonce.ReasonHandlerError)})
		if err := s.Write(m, time.Unix(1e9, 0)); err != nil {
			t.Fatal(err)
		}
	}
	write(map[string]int{metrics.InProgressHidden: 3, string(sqsonce.KindInProgress): 5, string(sqsonce.KindProcessed): 7})
	write(map[string]int{string(sqsonce.KindInProgress): 1})
	write(map[string]int{metrics.InProgressHidden: 2})
	if hidden != 5 {
		t.Errorf("counted %d hidden, want 3 + 2", hidden)
	}
	if _, err := m.Write([]byte("not EMF\n")); err == nil {
		t.Error("a line that is not EMF was accepted")
	}
}
