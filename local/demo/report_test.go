package demo

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// scenario is a small finished run: by default every key processed once by
// its first send, in an invocation that recorded its completion, re-sends
// suppressed, the poison and permanent keys at the operator queue.
type scenario struct {
	w      Workload
	ledger []Entry
	obs    Observed
	ev     Evaluation
}

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

const lockHold = 2 * time.Second

func newScenario(t *testing.T) *scenario {
	t.Helper()
	w, err := NewWorkload(WorkloadSpec{Keys: 20, DuplicateShare: 0.5, Poison: 1, Permanent: 1, MaxReceiveCount: 3}, 3, "r")
	if err != nil {
		t.Fatal(err)
	}
	sc := &scenario{w: w, obs: Observed{
		Acked: map[string]bool{}, Operator: map[string][]Arrival{}, Invocations: map[string]InvocationInfo{},
		Left: map[string]int{"main": 0, "dead-letter": 0}, Receipts: map[string][]Receipt{},
	}, ev: Evaluation{
		Mode: "local", LockHold: lockHold, Timings: Timings{MaxReceiveCount: 3, MaxAttempts: 1, FunctionTimeoutSeconds: 1},
		Ceiling: func(n int) float64 { return float64(int(1) << n) },
	}}
	keys := w.KeyIndex()
	for i, s := range w.Sends {
		switch keys[s.Key].Kind {
		case Poison:
			sc.obs.Operator[s.ID] = []Arrival{{Send: s.ID, Key: s.Key, MessageID: "op-" + s.ID, Reason: "max-attempts", ReplayCount: "2"}}
		case Permanent:
			sc.obs.Acked[s.ID] = true
			sc.obs.Operator[s.ID] = []Arrival{{Send: s.ID, Key: s.Key, MessageID: "op-" + s.ID, Reason: "permanent-error"}}
		default:
			sc.obs.Acked[s.ID] = true
			if s.Copy == 1 {
				sc.effect(s, "req-"+s.ID, t0.Add(time.Duration(i)*time.Second), true)
				sc.deliver(s, "req-"+s.ID, outcomeProcessed)
			} else {
				sc.deliver(s, "req-"+s.ID, outcomeDuplicate)
			}
		}
	}
	return sc
}

// deliver adds a delivery of send s's message to invocation req, which
// answered it outcome.
func (sc *scenario) deliver(s Send, req, outcome string) {
	id := "m-" + s.ID
	sc.obs.Receipts[id] = append(sc.obs.Receipts[id], Receipt{Receive: len(sc.obs.Receipts[id]) + 1, RequestID: req, Outcome: outcome, Deleted: outcome != outcomeFailed})
	sc.obs.Deliveries++
}

// effect adds a side effect of send s by invocation req, started at started;
// completed adds the completion write that invocation made for it.
func (sc *scenario) effect(s Send, req string, started time.Time, completed bool) {
	at := started.Add(10 * time.Millisecond)
	sc.ledger = append(sc.ledger, Entry{Seq: len(sc.ledger) + 1, At: at, Key: s.Key, Send: s.ID, RequestID: req})
	if _, known := sc.obs.Invocations[req]; !known {
		sc.obs.Invocations[req] = InvocationInfo{Started: started}
	}
	if completed {
		sc.obs.Completions = append(sc.obs.Completions, Completion{Key: s.Key, RequestID: req, At: at.Add(time.Millisecond), OK: true})
	}
}

// abandonFirst turns the first side effect of s's key into one whose
// invocation was abandoned at its timeout before recording the completion.
func (sc *scenario) abandonFirst(s Send, crash bool) (req string, started time.Time) {
	for i := range sc.ledger {
		if e := &sc.ledger[i]; e.Key == s.Key {
			e.Crash = crash
			inv := sc.obs.Invocations[e.RequestID]
			inv.Abandoned = true
			sc.obs.Invocations[e.RequestID] = inv
			sc.obs.Completions = slices.DeleteFunc(sc.obs.Completions, func(c Completion) bool { return c.RequestID == e.RequestID })
			return e.RequestID, inv.Started
		}
	}
	panic("no side effect for " + s.Key)
}

// later is a time after every side effect of the scenario.
var later = t0.Add(time.Hour)

func (sc *scenario) summarize() Summary { return Summarize(sc.w, sc.ledger, sc.obs, sc.ev) }

func (sc *scenario) normalSend(copy int) Send {
	keys := sc.w.KeyIndex()
	for _, s := range sc.w.Sends {
		if keys[s.Key].Kind == Normal && s.Copy == copy {
			return s
		}
	}
	panic("no such send")
}

func TestSummarizeCleanRun(t *testing.T) {
	t.Parallel()
	sc := newScenario(t)
	sc.obs.Replays = []Replay{{Send: "x", Attempt: 2, Delay: 3}, {Send: "x", Attempt: 1, Delay: 1}, {Send: "y", Attempt: 1, Delay: 0}}
	s := sc.summarize()
	if !s.OK || len(s.Violations) != 0 || len(s.Unexpected) != 0 {
		t.Fatalf("clean run not OK: %v %v", s.Violations, s.Unexpected)
	}
	st := sc.w.Stats()
	if s.Lost != 0 || s.SideEffects.ExactlyOnce != 18 || s.SideEffects.None != 2 || s.Processed != 18 ||
		s.DuplicatesSuppressed != st.ExtraCopies || s.Operator.Total != 2 || s.Sent != st.Messages {
		t.Errorf("summary %+v", s)
	}
	if s.Operator.ByReason["max-attempts"] != 1 || s.Operator.ByReason["permanent-error"] != 1 {
		t.Errorf("operator reasons %v", s.Operator.ByReason)
	}
	want := []ReplayAttempt{{Attempt: 1, Count: 2, CeilingSeconds: 2, Delays: []int{0, 1}}, {Attempt: 2, Count: 1, CeilingSeconds: 4, Delays: []int{3}}}
	if len(s.Replays.ByAttempt) != 2 || s.Replays.Total != 3 ||
		!slices.Equal(s.Replays.ByAttempt[0].Delays, want[0].Delays) || s.Replays.ByAttempt[1].CeilingSeconds != 4 {
		t.Errorf("replays %+v, want %+v", s.Replays, want)
	}
	text := s.Render()
	for _, line := range []string{"lost                  0  [ok]", "verdict: OK: every key's side effect exactly once, nothing lost", "duplicate window      not hit",
		"processed           18 ran the handler", fmt.Sprintf("duplicate           %d answered", st.ExtraCopies)} {
		if !strings.Contains(text, line) {
			t.Errorf("report lacks %q:\n%s", line, text)
		}
	}
}

// TestSummarizeViolations breaks a clean run in every way the report must
// catch, the double charge first.
func TestSummarizeViolations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		break_ func(sc *scenario)
		want   string
		check  func(t *testing.T, s Summary)
	}{
		{
			name: "a second charge by another completed invocation",
			break_: func(sc *scenario) {
				sc.effect(sc.normalSend(2), "another", later, true)
			},
			want: "(invocation another) came",
			check: func(t *testing.T, s Summary) {
				if !strings.Contains(s.Violations[0], "after the key's completion was recorded") || s.SideEffects.InWindow != 0 {
					t.Errorf("violations %v, side effects %+v", s.Violations, s.SideEffects)
				}
			},
		},
		{
			name: "a charge 1 ms after a completed one, by an invocation that timed out",
			break_: func(sc *scenario) {
				s := sc.normalSend(1)
				first := sc.ledger[slices.IndexFunc(sc.ledger, func(e Entry) bool { return e.Key == s.Key })]
				// effect dates the side effect 10 ms after its invocation
				// started: 2 ms after the first, 1 ms after its completion.
				sc.effect(s, "timed-out", first.At.Add(-8*time.Millisecond), false)
				sc.obs.Invocations["timed-out"] = InvocationInfo{Started: first.At.Add(-8 * time.Millisecond), Abandoned: true}
			},
			want: "came 1ms after the key's completion was recorded",
		},
		{
			name: "a charge after one whose invocation neither timed out nor recorded its completion",
			break_: func(sc *scenario) {
				s := sc.normalSend(1)
				sc.obs.Completions = slices.DeleteFunc(sc.obs.Completions, func(c Completion) bool { return c.Key == s.Key })
				sc.effect(s, "second", later, false)
			},
			want: "ended without recording its completion",
		},
		{
			name: "a charge while an abandoned invocation's lock still held",
			break_: func(sc *scenario) {
				s := sc.normalSend(1)
				_, started := sc.abandonFirst(s, true)
				sc.effect(s, "too-soon", started.Add(lockHold/2), true)
			},
			want: "before its lock (held at least 2s) could expire",
		},
		{
			name: "a charge after an abandoned invocation that had recorded the completion",
			break_: func(sc *scenario) {
				// With -crash, the records processed alongside the crashed one
				// carry its abandoned request id: that alone excuses nothing.
				s := sc.normalSend(1)
				req, _ := sc.abandonFirst(s, false)
				sc.obs.Completions = append(sc.obs.Completions, Completion{Key: s.Key, RequestID: req, At: later.Add(-time.Minute), OK: true})
				sc.effect(s, "redelivery", later, true)
			},
			want: "after the key's completion was recorded",
		},
		{
			name: "a charge by an invocation no mapping reported",
			break_: func(sc *scenario) {
				s := sc.normalSend(1)
				req, _ := sc.abandonFirst(s, false)
				delete(sc.obs.Invocations, req)
				sc.effect(s, "redelivery", later, true)
			},
			want: "which no event source mapping reported",
		},
		{
			name: "a processable key with no side effect, its copies at the operator queue",
			break_: func(sc *scenario) {
				s := sc.normalSend(1)
				sc.ledger = slices.DeleteFunc(sc.ledger, func(e Entry) bool { return e.Key == s.Key })
				for _, snd := range sc.w.Sends {
					if snd.Key == s.Key {
						sc.obs.Operator[snd.ID] = []Arrival{{Send: snd.ID, Key: s.Key, MessageID: "op-" + snd.ID, Reason: "max-attempts"}}
					}
				}
			},
			want: "1 key has no side effect, although their handler succeeds: every copy ran out of retries",
		},
		{
			name:   "a send never deleted and not at the operator is lost",
			break_: func(sc *scenario) { delete(sc.obs.Acked, sc.normalSend(2).ID) },
			want:   "lost: 1",
			check: func(t *testing.T, s Summary) {
				if s.Lost != 1 || !strings.Contains(s.LostSends[0], "never deleted") {
					t.Errorf("lost %d %v", s.Lost, s.LostSends)
				}
			},
		},
		{
			name: "a key deleted without any side effect is lost",
			break_: func(sc *scenario) {
				s := sc.normalSend(1)
				sc.ledger = slices.DeleteFunc(sc.ledger, func(e Entry) bool { return e.Key == s.Key })
			},
			want: "1 key has no side effect",
			check: func(t *testing.T, s Summary) {
				if !strings.Contains(s.LostSends[0], "no side effect") {
					t.Errorf("lost sends %v", s.LostSends)
				}
			},
		},
		{
			name:   "a message left in the DLQ",
			break_: func(sc *scenario) { sc.obs.Left["dead-letter"] = 1 },
			want:   "the dead-letter queue still holds 1 message",
		},
		{
			name: "a side effect for a key never sent",
			break_: func(sc *scenario) {
				sc.ledger = append(sc.ledger, Entry{Seq: 1000, Key: "order-99999", Send: "s"})
			},
			want: "never sent",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sc := newScenario(t)
			tt.break_(sc)
			s := sc.summarize()
			if s.OK || !strings.Contains(strings.Join(s.Violations, "\n"), tt.want) {
				t.Fatalf("OK=%v violations %v, want one with %q", s.OK, s.Violations, tt.want)
			}
			if text := s.Render(); !strings.Contains(text, "verdict: FAILED") || strings.Contains(text, "verdict: OK") {
				t.Error("report does not say FAILED")
			}
			if tt.check != nil {
				tt.check(t, s)
			}
		})
	}
}

// TestSummarizeDocumentedWindow: a key whose first side effect was made by an
// invocation that never recorded its completion, and charged again once that
// lock expired, is named in the duplicate window with its cause. The run is
// OK only when the demo injected that cause (a -crash key, a -chaos fault in
// the COMPLETED write, or in any call of that invocation, which spent its
// time); the same duplicate made by the demo's own timings fails it, with
// the explanation and the flag that gives more headroom.
func TestSummarizeDocumentedWindow(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name       string
		crash      bool
		failedOnly bool // the completion write failed; the invocation ended normally
		faulted    bool // -chaos injected a fault into that write
		invFaulted bool // -chaos injected a fault into another call of the invocation
		cause      string
		injected   bool
	}{
		{"crash", true, false, false, false, "abandoned at its timeout: crash injected", true},
		{"timeout", false, false, false, false, "abandoned at its timeout, with no crash injected", false},
		{"chaos in the invocation, timeout", false, false, false, true, "abandoned at its timeout: -chaos injected faults into its calls", true},
		{"failed completion write", false, true, false, false, "its COMPLETED write failed, with no fault injected", false},
		{"chaos in the completion write", false, true, true, false, "its COMPLETED write failed: -chaos injected a fault into it", true},
		{"chaos in the invocation, failed completion write", false, true, false, true, "its COMPLETED write failed: it ran out of time, spent by faults -chaos injected", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sc := newScenario(t)
			s1 := sc.normalSend(1)
			req, started := sc.abandonFirst(s1, tt.crash)
			if tt.failedOnly {
				sc.obs.Invocations[req] = InvocationInfo{Started: started}
				sc.obs.Completions = append(sc.obs.Completions, Completion{Key: s1.Key, RequestID: req, At: started.Add(20 * time.Millisecond)})
			}
			if tt.faulted {
				sc.obs.FaultedCompletions = map[string]bool{s1.Key: true}
			}
			if tt.invFaulted {
				sc.obs.FaultedInvocations = map[string]bool{req: true}
			}
			sc.effect(s1, "redelivery", started.Add(lockHold), true)
			s := sc.summarize()
			if s.OK != tt.injected {
				t.Fatalf("OK %v, want %v; violations %v", s.OK, tt.injected, s.Violations)
			}
			if s.SideEffects.Multiple != 1 || s.SideEffects.InWindow != 1 || len(s.Window.Keys) != 1 {
				t.Fatalf("side effects %+v window %+v", s.SideEffects, s.Window)
			}
			k := s.Window.Keys[0]
			if k.Key != s1.Key || k.Injected != tt.injected || k.SideEffects != 2 || len(k.Causes) != 1 ||
				k.Causes[0].RequestID != req || !strings.HasPrefix(k.Causes[0].Cause, tt.cause) || k.Causes[0].Injected != tt.injected {
				t.Errorf("window key %+v", k)
			}
			if iv := s.Invocations; tt.invFaulted && !tt.failedOnly && (iv.TimedOut != 1 || iv.TimedOutChaos != 1) {
				t.Errorf("invocations %+v: want the one timeout counted as slowed by -chaos", iv)
			}
			text := s.Render()
			wants := []string{"duplicate window      1 key had a second side effect", tt.cause}
			if tt.invFaulted && !tt.failedOnly {
				wants = append(wants, "timed out           1: 0 crashes the demo injected, 1 slowed by faults -chaos injected, 0 by nothing it injected  [ok]")
			}
			if tt.injected {
				wants = append(wants, "1 was caused by a fault the demo", "verdict: OK")
			} else {
				wants = append(wants, "0 were caused by a fault the demo",
					"VIOLATION: 1 key had a duplicate side effect that no injected fault explains ("+s1.Key+")",
					"why: ", "This machine is slower than the demo's timings assume", "-function-timeout 15s", "verdict: FAILED")
			}
			for _, want := range wants {
				if !strings.Contains(text, want) {
					t.Errorf("report lacks %q:\n%s", want, text)
				}
			}
		})
	}
}

// TestSummarizeExhaustedRetries: with -max-receive-count/-max-attempts
// chosen so low that a transient key runs out of retries, its absence from
// the ledger is reported, not failed, and the verdict says so.
func TestSummarizeExhaustedRetries(t *testing.T) {
	t.Parallel()
	sc := newScenario(t)
	sc.ev.RetriesOverride = true
	s1 := sc.normalSend(1)
	sc.ledger = slices.DeleteFunc(sc.ledger, func(e Entry) bool { return e.Key == s1.Key })
	for _, snd := range sc.w.Sends {
		if snd.Key == s1.Key {
			sc.obs.Operator[snd.ID] = []Arrival{{Send: snd.ID, Key: s1.Key, MessageID: "op-" + snd.ID, Reason: "max-attempts"}}
		}
	}
	s := sc.summarize()
	if !s.OK || s.SideEffects.Exhausted != 1 || s.Lost != 0 {
		t.Fatalf("ok %v exhausted %d lost %d violations %v", s.OK, s.SideEffects.Exhausted, s.Lost, s.Violations)
	}
	text := s.Render()
	for _, want := range []string{"retries ran out     1 processable key", "except 1 whose retries ran out before they could run", "reached the operator queue (max-attempts) although its handler succeeds"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
}

// TestSummarizeRunThatGaveUp: when the run gives up before sending part of
// the workload, those sends are counted as not sent, not as lost, and their
// keys are not each a violation; as many sends never deleted as the queues
// still hold are not lost either; keys that were sent and have no side
// effect are named in one violation, a few of them, however many there are.
func TestSummarizeRunThatGaveUp(t *testing.T) {
	t.Parallel()
	sc := newScenario(t)
	const queued = 5
	sc.obs.Left["main"] = queued
	sc.obs.Unsent = map[string]bool{}
	var unsentKeys, missingKeys []string
	for _, snd := range sc.w.Sends {
		if sc.w.KeyIndex()[snd.Key].Kind != Normal {
			continue
		}
		switch {
		case len(unsentKeys) < 3 || slices.Contains(unsentKeys, snd.Key):
			// Never sent: no side effect, never deleted.
			sc.obs.Unsent[snd.ID] = true
			if !slices.Contains(unsentKeys, snd.Key) {
				unsentKeys = append(unsentKeys, snd.Key)
			}
		case len(missingKeys) < 12 || slices.Contains(missingKeys, snd.Key):
			// Sent and deleted, but no side effect: a violation.
			if !slices.Contains(missingKeys, snd.Key) {
				missingKeys = append(missingKeys, snd.Key)
			}
		default:
			continue
		}
		delete(sc.obs.Acked, snd.ID)
		sc.ledger = slices.DeleteFunc(sc.ledger, func(e Entry) bool { return e.Key == snd.Key })
	}
	if len(missingKeys) < 12 {
		t.Fatalf("the scenario has %d normal keys to leave without a side effect, want 12", len(missingKeys))
	}
	s := sc.summarize()
	unsent := len(sc.obs.Unsent)
	if s.NotSent != unsent {
		t.Errorf("not sent %d, want %d", s.NotSent, unsent)
	}
	var missingSends int
	for _, snd := range sc.w.Sends {
		if slices.Contains(missingKeys, snd.Key) {
			missingSends++
		}
	}
	if s.Lost != missingSends-queued {
		t.Errorf("lost %d, want %d: the sends never deleted less those still queued, not those never sent", s.Lost, missingSends-queued)
	}
	var lines []string
	for _, v := range s.Violations {
		if strings.Contains(v, "no side effect") {
			lines = append(lines, v)
		}
	}
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "12 keys have no side effect") || !strings.Contains(lines[0], "... and 2 more") {
		t.Errorf("violations about keys without a side effect: %q, want one naming 10 of the 12", lines)
	}
	for _, k := range unsentKeys {
		if strings.Contains(strings.Join(s.Violations, "\n"), k) {
			t.Errorf("key %s, never sent, is named in a violation: %v", k, s.Violations)
		}
	}
	if text := s.Render(); !strings.Contains(text, fmt.Sprintf("not sent              %d: the run gave up before sending them", unsent)) {
		t.Errorf("report lacks the not-sent line:\n%s", text)
	}
}

func TestSummaryJSONFields(t *testing.T) {
	t.Parallel()
	raw, err := json.Marshal(newScenario(t).summarize())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"ok", "lost", "sent", "uniqueKeys", "sideEffects", "duplicatesSuppressed", "replays", "operator", "documentedWindow", "violations", "leftInQueues"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON summary has no %q", k)
		}
	}
	if v, _ := m["violations"].([]any); v == nil {
		t.Error("violations must be [] rather than null, for jq users")
	}
	if k, _ := m["documentedWindow"].(map[string]any)["keys"].([]any); k == nil {
		t.Error("documentedWindow.keys must be [] rather than null, for jq users")
	}
}

func TestParseMaxReceiveCount(t *testing.T) {
	t.Parallel()
	for policy, want := range map[string]int{
		`{"deadLetterTargetArn":"arn","maxReceiveCount":5}`:   5,
		`{"deadLetterTargetArn":"arn","maxReceiveCount":"3"}`: 3,
		``:                        -1,
		`{"maxReceiveCount":0}`:   -1,
		`{"maxReceiveCount":"x"}`: -1,
		`not json`:                -1,
	} {
		got, err := parseMaxReceiveCount(policy)
		if (want < 0) != (err != nil) || (want > 0 && got != want) {
			t.Errorf("parseMaxReceiveCount(%q) = %d, %v; want %d", policy, got, err, want)
		}
	}
}

// TestOperatorArrivingTwiceIsANote: a forward sent again after its invocation
// ended unacknowledged is the documented operator-queue limit: reported, every
// arrival counted, and not a failed run (nothing was lost).
func TestOperatorArrivingTwiceIsANote(t *testing.T) {
	t.Parallel()
	sc := newScenario(t)
	for id, as := range sc.obs.Operator {
		sc.obs.Operator[id] = append(as, Arrival{Send: id, Key: as[0].Key, MessageID: "again", Reason: as[0].Reason})
		break
	}
	s := sc.summarize()
	if !s.OK || s.Operator.Total != 3 || !strings.Contains(strings.Join(s.Unexpected, "\n"), "reached the operator queue 2 times") {
		t.Errorf("OK=%v operator total %d notes %v; want OK, every arrival counted (3), and a note", s.OK, s.Operator.Total, s.Unexpected)
	}
}

// TestRenderCapsNotes: a run with a note for hundreds of keys shows the
// first ten and says how many more -json holds.
func TestRenderCapsNotes(t *testing.T) {
	t.Parallel()
	s := newScenario(t).summarize()
	for i := range 15 {
		s.Unexpected = append(s.Unexpected, fmt.Sprintf("normal key order-%05d reached the operator queue", i))
	}
	text := s.Render()
	if got := strings.Count(text, "note: normal key"); got != 10 {
		t.Errorf("%d notes shown, want 10", got)
	}
	if !strings.Contains(text, `note: ... and 5 more notes like these (all of them in -json "unexpected")`) {
		t.Errorf("report does not say how many notes it left out:\n%s", text)
	}
}
