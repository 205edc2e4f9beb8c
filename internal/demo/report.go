package demo

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Summary is the machine-readable result of a run (--json), and what the
// text report is rendered from.
type Summary struct {
	Mode            string        `json:"mode"` // "local" or "stack"
	OK              bool          `json:"ok"`
	Seed            uint64        `json:"seed"`
	RunID           string        `json:"runId"`
	DurationSeconds float64       `json:"durationSeconds"`
	Workload        WorkloadStats `json:"workload"`
	Timings         Timings       `json:"timings"`

	Sent        int         `json:"sent"`
	UniqueKeys  int         `json:"uniqueKeys"`
	SideEffects SideEffects `json:"sideEffects"`
	// Processed is the number of sends whose own delivery made the key's side
	// effect; DuplicatesSuppressed the sends the processor deleted without
	// running the handler because their key was already done.
	Processed            int            `json:"processed"`
	DuplicatesSuppressed int            `json:"duplicatesSuppressed"`
	Deliveries           int            `json:"deliveries"`
	DeadLettered         int            `json:"deadLettered"`
	Replays              ReplayStats    `json:"replays"`
	Operator             OpStats        `json:"operator"`
	Lost                 int            `json:"lost"`
	LostSends            []string       `json:"lostSends,omitempty"`
	LeftInQueues         map[string]int `json:"leftInQueues"`
	Window               Window         `json:"documentedWindow"`
	Abandoned            int            `json:"abandonedInvocations"`

	// Violations are broken invariants: any makes OK false and the exit
	// status non-zero. Unexpected are outcomes that break no invariant but
	// differ from what the workload was built to show.
	Violations []string `json:"violations"`
	Unexpected []string `json:"unexpected"`
	// Checked and NotChecked say what this mode could verify (--stack cannot
	// see the deployed handler's side effects).
	Checked    []string `json:"checked"`
	NotChecked []string `json:"notChecked,omitempty"`

	Ledger string `json:"ledger,omitempty"`
	Logs   string `json:"logs,omitempty"`
	// Adaptations are the places where moto_server's stack differs from what
	// CloudFormation would build, as samstack reports them.
	Adaptations []string `json:"adaptations,omitempty"`
}

// Timings are the pipeline settings the run used.
type Timings struct {
	VisibilityTimeoutSeconds int     `json:"visibilityTimeoutSeconds"`
	FunctionTimeoutSeconds   int     `json:"functionTimeoutSeconds"`
	LockTimeoutSeconds       int     `json:"lockTimeoutSeconds"`
	MaxReceiveCount          int     `json:"maxReceiveCount"`
	MaxAttempts              int     `json:"maxAttempts"`
	BackoffBaseSeconds       float64 `json:"backoffBaseSeconds"`
	BackoffRate              float64 `json:"backoffRate"`
	MaxDelaySeconds          int     `json:"maxDelaySeconds"`
	Jitter                   string  `json:"jitter"`
}

// SideEffects counts the ledger per key.
type SideEffects struct {
	Total int `json:"total"`
	// KeysByCount maps a number of side effects ("0", "1", "2", ...) to how
	// many keys had that many.
	KeysByCount map[string]int `json:"keysByCount"`
	ExactlyOnce int            `json:"exactlyOnce"`
	// None is keys with no side effect; each must be at the operator queue.
	None int `json:"none"`
	// Multiple is keys with more than one; InWindow of them are explained by
	// the documented window, the rest are violations.
	Multiple int `json:"multiple"`
	InWindow int `json:"inWindow"`
}

// ReplayStats are the replayer's sends back to the main queue.
type ReplayStats struct {
	Total     int             `json:"total"`
	ByAttempt []ReplayAttempt `json:"byAttempt"`
	// Rescued is keys whose side effect happened on a replayed message.
	Rescued int `json:"rescued"`
}

// ReplayAttempt is every replay number n with the delays drawn for it.
type ReplayAttempt struct {
	Attempt        int     `json:"attempt"`
	Count          int     `json:"count"`
	CeilingSeconds float64 `json:"ceilingSeconds"`
	Delays         []int   `json:"delaySeconds"`
}

// OpStats are the messages found at the operator queue.
type OpStats struct {
	Total    int            `json:"total"`
	ByReason map[string]int `json:"byReason"`
}

// Window lists the keys whose extra side effects the documented duplicate
// window explains: an invocation abandoned (crashed or timed out) after the
// side effect and before its completion was recorded.
type Window struct {
	Keys []WindowKey `json:"keys"`
}

// WindowKey is one key inside the documented window.
type WindowKey struct {
	Key               string   `json:"key"`
	SideEffects       int      `json:"sideEffects"`
	AbandonedRequests []string `json:"abandonedRequests"`
	Injected          bool     `json:"injected"` // by --crash
}

// Evaluation is what Summarize needs beyond the workload and ledger.
type Evaluation struct {
	Mode    string
	Seed    uint64
	Timings Timings
	// Ceiling returns the replay delay ceiling of attempt n in seconds.
	Ceiling func(n int) float64
	Ledger  string
	Logs    string
}

// Summarize checks the invariants: every key's side effect exactly once
// (extra ones only inside the documented window), every send processed or at
// the operator queue, the queues drained.
func Summarize(w Workload, ledger []Entry, obs Observed, ev Evaluation) Summary {
	s := Summary{
		Mode:            ev.Mode,
		Seed:            ev.Seed,
		RunID:           w.RunID,
		DurationSeconds: obs.Elapsed.Seconds(),
		Workload:        w.Stats(),
		Timings:         ev.Timings,
		Sent:            len(w.Sends),
		UniqueKeys:      len(w.Keys),
		Deliveries:      obs.Deliveries,
		DeadLettered:    obs.DeadLettered,
		Abandoned:       len(obs.Abandoned),
		LeftInQueues:    obs.Left,
		Ledger:          ev.Ledger,
		Logs:            ev.Logs,
		Violations:      []string{},
		Unexpected:      []string{},
		Checked: []string{
			"side effects per key, from the ledger",
			"every message processed or at the operator queue (lost: 0)",
			"main queue and dead-letter queue drained",
		},
	}
	if s.LeftInQueues == nil {
		s.LeftInQueues = map[string]int{}
	}
	keys := w.KeyIndex()

	effects := map[string][]Entry{}
	ownSend := map[string]bool{}
	for _, e := range ledger {
		effects[e.Key] = append(effects[e.Key], e)
		ownSend[e.Send] = true
		if _, ok := keys[e.Key]; !ok {
			s.Violations = append(s.Violations, fmt.Sprintf("ledger entry %d is for %q, a key this run never sent", e.Seq, e.Key))
		}
	}
	s.SideEffects = SideEffects{Total: len(ledger), KeysByCount: map[string]int{}}

	atOperator := map[string][]Arrival{}
	for _, a := range obs.Operator {
		atOperator[a.Key] = append(atOperator[a.Key], a)
	}

	for _, k := range w.Keys {
		es := effects[k.ID]
		s.SideEffects.KeysByCount[strconv.Itoa(len(es))]++
		switch {
		case len(es) == 0:
			s.SideEffects.None++
		case len(es) == 1:
			s.SideEffects.ExactlyOnce++
		default:
			s.SideEffects.Multiple++
			var abandoned []string
			completed := 0
			injected := false
			for _, e := range es {
				if obs.Abandoned[e.RequestID] {
					abandoned = append(abandoned, e.RequestID)
					injected = injected || e.Crash
				} else {
					completed++
				}
			}
			if completed <= 1 {
				s.SideEffects.InWindow++
				s.Window.Keys = append(s.Window.Keys, WindowKey{Key: k.ID, SideEffects: len(es), AbandonedRequests: abandoned, Injected: injected})
			} else {
				s.Violations = append(s.Violations, fmt.Sprintf("key %s: %d side effects, %d of them from invocations that completed normally (a duplicate outside the documented window)", k.ID, len(es), completed))
			}
		}
		s.Unexpected = append(s.Unexpected, expectation(k, es, atOperator[k.ID], ev.Timings)...)
	}

	for _, snd := range w.Sends {
		_, opOK := obs.Operator[snd.ID]
		switch {
		case opOK:
		case obs.Acked[snd.ID] && len(effects[snd.Key]) > 0:
			if ownSend[snd.ID] {
				s.Processed++
			} else {
				s.DuplicatesSuppressed++
			}
		case obs.Acked[snd.ID]:
			s.Lost++
			s.LostSends = append(s.LostSends, snd.ID+" (deleted from the main queue, but its key has no side effect and it is not at the operator queue)")
		default:
			s.Lost++
			s.LostSends = append(s.LostSends, snd.ID+" (never deleted by the processor, not at the operator queue)")
		}
	}

	s.Operator = OpStats{Total: len(obs.Operator), ByReason: map[string]int{}}
	for _, a := range obs.Operator {
		s.Operator.ByReason[reasonOrUnknown(a.Reason)]++
	}

	s.Replays = replayStats(obs.Replays, ev.Ceiling)
	for _, es := range effects {
		for _, e := range es {
			if e.ReplayCount != "" {
				s.Replays.Rescued++
				break
			}
		}
	}
	sort.Slice(s.Window.Keys, func(i, j int) bool { return s.Window.Keys[i].Key < s.Window.Keys[j].Key })
	s.finish()
	return s
}

// finish adds the invariants common to both modes, lost and drained, and
// sets OK.
func (s *Summary) finish() {
	if s.Lost > 0 {
		s.Violations = append(s.Violations, fmt.Sprintf("lost: %d messages neither processed nor at the operator queue", s.Lost))
	}
	for _, q := range slices.Sorted(maps.Keys(s.LeftInQueues)) {
		if n := s.LeftInQueues[q]; n > 0 {
			s.Violations = append(s.Violations, fmt.Sprintf("the %s queue still holds %d messages", q, n))
		}
	}
	const most = 20
	if len(s.LostSends) > most {
		s.LostSends = append(s.LostSends[:most], fmt.Sprintf("... and %d more", len(s.LostSends)-most))
	}
	s.OK = len(s.Violations) == 0
}

// parseMaxReceiveCount reads maxReceiveCount from a RedrivePolicy attribute,
// where SQS gives it as a number or a string.
func parseMaxReceiveCount(policy string) (int, error) {
	if policy == "" {
		return 0, fmt.Errorf("the main queue has no redrive policy: poison messages would never reach the DLQ")
	}
	var p struct {
		MaxReceiveCount json.RawMessage `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(policy), &p); err != nil {
		return 0, fmt.Errorf("redrive policy %q: %w", policy, err)
	}
	n, err := strconv.Atoi(strings.Trim(string(p.MaxReceiveCount), `"`))
	if err != nil || n < 1 {
		return 0, fmt.Errorf("redrive policy %q: maxReceiveCount is not a positive integer", policy)
	}
	return n, nil
}

// expectation compares a key's outcome with what its kind was built to show.
func expectation(k Key, es []Entry, ops []Arrival, t Timings) []string {
	var out []string
	switch k.Kind {
	case Poison:
		if len(ops) == 0 || ops[0].Reason != "max-attempts" {
			out = append(out, fmt.Sprintf("poison key %s did not reach the operator queue with reason max-attempts (%v)", k.ID, ops))
		}
	case Permanent:
		if len(ops) == 0 || ops[0].Reason != "permanent-error" {
			out = append(out, fmt.Sprintf("permanent key %s did not reach the operator queue with reason permanent-error (%v)", k.ID, ops))
		}
	case Normal, Transient:
		if len(ops) > 0 {
			out = append(out, fmt.Sprintf("%s key %s reached the operator queue (%s) although its handler succeeds", k.Kind, k.ID, reasonOrUnknown(ops[0].Reason)))
		}
		if k.Crash && len(es) < 2 {
			out = append(out, fmt.Sprintf("key %s was made to crash after its side effect but has %d side effect(s)", k.ID, len(es)))
		}
	}
	return out
}

func replayStats(replays []Replay, ceiling func(int) float64) ReplayStats {
	st := ReplayStats{Total: len(replays), ByAttempt: []ReplayAttempt{}}
	by := map[int][]int{}
	for _, r := range replays {
		by[r.Attempt] = append(by[r.Attempt], r.Delay)
	}
	for _, n := range slices.Sorted(maps.Keys(by)) {
		d := by[n]
		slices.Sort(d)
		a := ReplayAttempt{Attempt: n, Count: len(d), Delays: d}
		if ceiling != nil {
			a.CeilingSeconds = ceiling(n)
		}
		st.ByAttempt = append(st.ByAttempt, a)
	}
	return st
}

func reasonOrUnknown(r string) string {
	if r == "" {
		return "(no reason attribute)"
	}
	return r
}

// Render writes the human-readable report.
func (s Summary) Render() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	mark := func(ok bool) string {
		if ok {
			return "ok"
		}
		return "FAIL"
	}
	wl := s.Workload
	p("")
	p("sqs-once %s run %s (seed %d), %.1f s", s.Mode, s.RunID, s.Seed, s.DurationSeconds)
	lock := fmt.Sprintf("%d s", s.Timings.LockTimeoutSeconds)
	if s.Timings.LockTimeoutSeconds == 0 {
		lock = "the invocation's deadline + 5 s"
	}
	p("  visibility timeout %d s, function timeout %d s, lock timeout %s, maxReceiveCount %d, MaxAttempts %d, replay backoff %s jitter base %g s rate %g cap %d s",
		s.Timings.VisibilityTimeoutSeconds, s.Timings.FunctionTimeoutSeconds, lock, s.Timings.MaxReceiveCount,
		s.Timings.MaxAttempts, s.Timings.Jitter, s.Timings.BackoffBaseSeconds, s.Timings.BackoffRate, s.Timings.MaxDelaySeconds)
	if s.Mode == "local" {
		p("  (demo timings: the queues' visibility timeout is set after the deploy; the template ties it to 6 x the function timeout + the batching window)")
	}
	if len(s.Adaptations) > 0 {
		p("  moto_server differs from CloudFormation in %d places, each handled or noted by samstack (alarms not created, ...): see -json \"adaptations\"", len(s.Adaptations))
	}
	p("")
	p("sent                  %d messages for %d unique keys", s.Sent, s.UniqueKeys)
	p("  re-sends            %d keys sent 2-3 times: %d extra copies with new messageIds, %d of them concurrently with the first", wl.DuplicateKeys, wl.ExtraCopies, wl.Concurrent)
	p("  poison              %d keys whose handler always fails", wl.Poison)
	p("  transient           %d keys that fail a few times, then succeed", wl.Transient)
	p("  permanent           %d keys the handler rejects as permanently invalid", wl.Permanent)
	if wl.Crash > 0 {
		p("  crash               %d keys whose invocation hangs after the side effect, until the function timeout", wl.Crash)
	}
	if s.Mode == "local" {
		p("deliveries            %d records delivered to the processor (re-sends, retries and redeliveries included)", s.Deliveries)
	}
	p("")
	if s.Mode == "local" {
		se := s.SideEffects
		p("side effects          %d in the ledger %s", se.Total, s.Ledger)
		p("  exactly once        %d keys", se.ExactlyOnce)
		p("  none                %d keys (each must be at the operator queue)", se.None)
		p("  more than once      %d keys: %d inside the documented window, %d outside  [%s]", se.Multiple, se.InWindow, se.Multiple-se.InWindow, mark(se.Multiple == se.InWindow))
	}
	if s.Mode == "stack" {
		p("completed keys        %d idempotency records COMPLETED", s.Processed)
	} else {
		p("processed             %d messages ran the handler to completion", s.Processed)
		p("duplicates suppressed %d re-sent messages deleted without running the handler", s.DuplicatesSuppressed)
		p("dead-lettered         %d messages reached the dead-letter queue", s.DeadLettered)
		p("replays               %d sent back to the main queue by the DLQ replayer; %d keys succeeded on a replay", s.Replays.Total, s.Replays.Rescued)
		for _, a := range s.Replays.ByAttempt {
			p("  replay %-3d          %d, delays drawn %s s (ceiling %g s)", a.Attempt, a.Count, joinInts(a.Delays), a.CeilingSeconds)
		}
	}
	p("operator queue        %d messages", s.Operator.Total)
	for _, r := range slices.Sorted(maps.Keys(s.Operator.ByReason)) {
		p("  %-19s %d", r, s.Operator.ByReason[r])
	}
	p("lost                  %d  [%s]", s.Lost, mark(s.Lost == 0))
	for _, l := range s.LostSends {
		p("  %s", l)
	}
	left := 0
	for _, n := range s.LeftInQueues {
		left += n
	}
	p("left in queues        %d  [%s]", left, mark(left == 0))
	p("")
	if len(s.Window.Keys) > 0 {
		p("documented window     %d keys had a second side effect, each explained by an invocation that was", len(s.Window.Keys))
		p("                      abandoned (crash or timeout) after its side effect and before the completion was")
		p("                      recorded: the lock expired, the message came back and the handler ran again.")
		p("                      sqs-once cannot close this window: see the README, \"Guarantees and their limits\", 1.")
		for _, k := range s.Window.Keys {
			how := "timed out"
			if k.Injected {
				how = "crash injected by -crash"
			}
			p("  %-19s %d side effects; abandoned invocation %s (%s)", k.Key, k.SideEffects, strings.Join(k.AbandonedRequests, ", "), how)
		}
	} else if s.Mode == "local" {
		p("documented window     not hit: no side effect was followed by an abandoned invocation (%d invocations abandoned)", s.Abandoned)
	}
	if len(s.NotChecked) > 0 {
		p("checked               %s", strings.Join(s.Checked, "; "))
		p("not checked           %s", strings.Join(s.NotChecked, "; "))
	}
	for _, u := range s.Unexpected {
		p("note: %s", u)
	}
	for _, v := range s.Violations {
		p("VIOLATION: %s", v)
	}
	if s.Logs != "" {
		p("function logs         %s", s.Logs)
	}
	p("")
	if s.OK {
		p("verdict: OK: every key's side effect exactly once%s, nothing lost", windowSuffix(s))
	} else {
		p("verdict: FAILED: %d invariant(s) broken", len(s.Violations))
	}
	return b.String()
}

func windowSuffix(s Summary) string {
	if len(s.Window.Keys) == 0 {
		return ""
	}
	return fmt.Sprintf(" (except %d inside the documented window)", len(s.Window.Keys))
}

func joinInts(d []int) string {
	const most = 25
	parts := make([]string, 0, min(len(d), most))
	for i, v := range d {
		if i == most {
			parts = append(parts, fmt.Sprintf("... (%d more)", len(d)-most))
			break
		}
		parts = append(parts, strconv.Itoa(v))
	}
	return strings.Join(parts, " ")
}
