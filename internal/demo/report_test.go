package demo

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// scenario is a small finished run: by default every key processed once by
// its first send, re-sends suppressed, the poison key at the operator queue.
type scenario struct {
	w      Workload
	ledger []Entry
	obs    Observed
}

func newScenario(t *testing.T) *scenario {
	t.Helper()
	w, err := NewWorkload(WorkloadSpec{Keys: 20, DuplicateShare: 0.5, Poison: 1, Permanent: 1, MaxReceiveCount: 3}, 3, "r")
	if err != nil {
		t.Fatal(err)
	}
	sc := &scenario{w: w, obs: Observed{
		Acked: map[string]bool{}, Operator: map[string]Arrival{}, Abandoned: map[string]bool{},
		Left: map[string]int{"main": 0, "dead-letter": 0},
	}}
	keys := w.KeyIndex()
	for _, s := range w.Sends {
		switch keys[s.Key].Kind {
		case Poison:
			sc.obs.Operator[s.ID] = Arrival{Send: s.ID, Key: s.Key, Reason: "max-attempts", ReplayCount: "4"}
		case Permanent:
			sc.obs.Acked[s.ID] = true
			sc.obs.Operator[s.ID] = Arrival{Send: s.ID, Key: s.Key, Reason: "permanent-error"}
		default:
			sc.obs.Acked[s.ID] = true
			if s.Copy == 1 {
				sc.ledger = append(sc.ledger, Entry{Seq: len(sc.ledger) + 1, Key: s.Key, Send: s.ID, RequestID: "req-" + s.ID})
			}
		}
	}
	return sc
}

func (sc *scenario) summarize() Summary {
	return Summarize(sc.w, sc.ledger, sc.obs, Evaluation{Mode: "local", Ceiling: func(n int) float64 { return float64(int(1) << n) }})
}

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
	for _, line := range []string{"lost                  0  [ok]", "verdict: OK", "documented window     not hit"} {
		if !strings.Contains(text, line) {
			t.Errorf("report lacks %q:\n%s", line, text)
		}
	}
}

func TestSummarizeViolations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		break_ func(sc *scenario)
		want   string
		check  func(t *testing.T, s Summary)
	}{
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
			want: "lost:",
			check: func(t *testing.T, s Summary) {
				if !strings.Contains(s.LostSends[0], "no side effect") {
					t.Errorf("lost sends %v", s.LostSends)
				}
			},
		},
		{
			name: "a second side effect from a completed invocation is a duplicate",
			break_: func(sc *scenario) {
				s := sc.normalSend(2)
				sc.ledger = append(sc.ledger, Entry{Seq: 999, Key: s.Key, Send: s.ID, RequestID: "another"})
			},
			want: "2 side effects, 2 of them from invocations that completed normally",
		},
		{
			name:   "a message left in the DLQ",
			break_: func(sc *scenario) { sc.obs.Left["dead-letter"] = 1 },
			want:   "the dead-letter queue still holds 1 messages",
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
			if !strings.Contains(s.Render(), "verdict: FAILED") {
				t.Error("report does not say FAILED")
			}
			if tt.check != nil {
				tt.check(t, s)
			}
		})
	}
}

// TestSummarizeDocumentedWindow: a key whose first side effect was followed by
// an abandoned invocation has two side effects, named as the documented
// window, and the run is still OK.
func TestSummarizeDocumentedWindow(t *testing.T) {
	t.Parallel()
	sc := newScenario(t)
	s1 := sc.normalSend(1)
	for i := range sc.ledger {
		if sc.ledger[i].Key == s1.Key {
			sc.ledger[i].Crash = true
			sc.obs.Abandoned[sc.ledger[i].RequestID] = true
		}
	}
	sc.ledger = append(sc.ledger, Entry{Seq: 500, Key: s1.Key, Send: s1.ID, RequestID: "redelivery"})
	s := sc.summarize()
	if !s.OK {
		t.Fatalf("violations %v", s.Violations)
	}
	if s.SideEffects.Multiple != 1 || s.SideEffects.InWindow != 1 || len(s.Window.Keys) != 1 ||
		s.Window.Keys[0].Key != s1.Key || !s.Window.Keys[0].Injected || s.Window.Keys[0].SideEffects != 2 {
		t.Errorf("side effects %+v window %+v", s.SideEffects, s.Window)
	}
	text := s.Render()
	for _, want := range []string{"documented window     1 keys had a second side effect", "crash injected by -crash", "except 1 inside the documented window"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
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
