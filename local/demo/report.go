package demo

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
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

	Sent       int `json:"sent"`
	UniqueKeys int `json:"uniqueKeys"`
	// Resolved is the sends that reached an end: deleted by the processor
	// (with -stack: their key COMPLETED) or at the operator queue. The
	// progress line's "messages done".
	Resolved    int         `json:"resolved"`
	SideEffects SideEffects `json:"sideEffects"`
	// Processed is the deliveries the processor answered "processed" (its
	// completion recorded or not), DuplicatesSuppressed those it answered
	// "duplicate": deleted without running the handler. With a target they
	// are sends: forwarded as their own message, or deleted because their
	// key arrived; with -stack, Processed is the keys COMPLETED.
	Processed            int `json:"processed"`
	DuplicatesSuppressed int `json:"duplicatesSuppressed"`
	Deliveries           int `json:"deliveries"`
	DeadLettered         int `json:"deadLettered"`
	// HealthyDeadLettered is the messages of keys whose handler succeeds
	// that went through the dead-letter queue (target 0). Not set with
	// -stack, which cannot see the dead-letter queue's traffic.
	HealthyDeadLettered *HealthyDeadLettered `json:"healthyDeadLettered,omitempty"`
	Replays             ReplayStats          `json:"replays"`
	Operator            OpStats              `json:"operator"`
	Lost                int                  `json:"lost"`
	LostSends           []string             `json:"lostSends,omitempty"`
	// NotSent are the sends the producer never sent: the run gave up
	// first. Neither lost nor processed; the run has failed already.
	NotSent      int            `json:"notSent,omitempty"`
	LeftInQueues map[string]int `json:"leftInQueues"`
	Window       Window         `json:"documentedWindow"`
	// Records are the processor's per-record outcomes, counted as it
	// decided them; Invocations its invocations.
	Records     RecordStats     `json:"records"`
	Invocations InvocationStats `json:"invocations"`
	// Chaos is what -chaos injected.
	Chaos *ChaosStats `json:"chaos,omitempty"`
	// Transactional is set with -tx: SideEffects then counts the business
	// table's items, committed with their completion.
	Transactional *TxStats `json:"transactional,omitempty"`
	// Headroom explains a failed run that shows signs of a machine slower
	// than the demo's timings assume, and which flag gives more.
	Headroom string `json:"headroom,omitempty"`
	// Foreign is the other producers' messages seen at the operator queue of
	// a deployed stack, and left there.
	Foreign int `json:"foreignAtOperator,omitempty"`

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
	// Removed: the run's temporary directory, with the ledger and the
	// logs, was removed at its end (no -keep, no -out); Ledger and Logs
	// are then empty.
	Removed bool `json:"removed,omitempty"`
	// Adaptations are the places where moto_server's stack differs from what
	// CloudFormation would build, as samstack reports them.
	Adaptations []string `json:"adaptations,omitempty"`
	// Target is set with -target: what arrived in the target queue, which
	// takes the place of SideEffects (no business handler runs).
	Target *TargetStats `json:"target,omitempty"`
	// Stage2 is set with -emit and -emit-inline: what the second stage
	// shipped per key.
	Stage2 *Stage2Stats `json:"stage2,omitempty"`
}

// Timings are the pipeline settings the run used.
type Timings struct {
	VisibilityTimeoutSeconds int     `json:"visibilityTimeoutSeconds"`
	FunctionTimeoutSeconds   float64 `json:"functionTimeoutSeconds"`
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
	// None is poison and permanent keys, with no side effect as built.
	None int `json:"none"`
	// Exhausted is processable keys with none because every copy ran out of
	// the retries -max-receive-count and -max-attempts allowed.
	Exhausted int `json:"exhausted"`
	// Multiple is keys with more than one; InWindow of them are explained by
	// the documented window, the rest are violations.
	Multiple int `json:"multiple"`
	InWindow int `json:"inWindow"`
}

// TxStats are -tx's side effects: the business table that holds those
// committed (SideEffects counts its items) and those the handler staged.
type TxStats struct {
	Table string `json:"table"`
	// Staged is every side effect the handler added to a transaction;
	// Uncommitted those of them not in the table, CrashedUncommitted of
	// which were staged by an invocation the demo crashed before its
	// commit.
	Staged             int `json:"staged"`
	Uncommitted        int `json:"uncommitted"`
	CrashedUncommitted int `json:"crashedUncommitted"`
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
	// Total counts arrivals: a send that arrived twice counts twice.
	Total    int            `json:"total"`
	ByReason map[string]int `json:"byReason"`
}

// RecordStats are what the processor answered each record delivered to it,
// one answer per delivery: all but InProgressHidden add up to
// Summary.Deliveries (Total).
type RecordStats struct {
	Processed  int `json:"processed"`
	Unrecorded int `json:"processedUnrecorded"`
	Duplicate  int `json:"duplicate"`
	InProgress int `json:"inProgress"`
	NotStarted int `json:"notStarted"`
	// Failed is records whose handler (or target) failed: retried, or sent
	// to the operator queue when the failure is permanent.
	Failed int `json:"failed"`
	// TimedOut is records not answered before their invocation was
	// abandoned at its timeout; NoAnswer those of an invocation that ended
	// in time without answering them (it failed as a whole).
	TimedOut int `json:"timedOut"`
	NoAnswer int `json:"noAnswer"`
	// Other counts any other answer by its outcome (payload-mismatch,
	// not-acquired, no-key, group-blocked, ...).
	Other map[string]int `json:"other,omitempty"`
	// InProgressHidden is the processor's metric of that name: records
	// refused as in progress whose visibility SQS set to the lock's
	// remaining time, so they come back when the lock can be taken over.
	// Part of InProgress, not an answer of its own.
	InProgressHidden int `json:"inProgressHidden"`
}

// recordStats counts each delivery once, by the answer it had when its
// invocation ended.
func recordStats(receipts map[string][]Receipt) RecordStats {
	var r RecordStats
	for _, rs := range receipts {
		for _, rc := range rs {
			switch rc.Outcome {
			case outcomeProcessed:
				r.Processed++
			case outcomeUnrecorded:
				r.Unrecorded++
			case outcomeDuplicate:
				r.Duplicate++
			case outcomeInProgress:
				r.InProgress++
			case outcomeNotStarted:
				r.NotStarted++
			case outcomeFailed:
				r.Failed++
			case "":
				if rc.Abandoned {
					r.TimedOut++
				} else {
					r.NoAnswer++
				}
			default:
				if r.Other == nil {
					r.Other = map[string]int{}
				}
				r.Other[rc.Outcome]++
			}
		}
	}
	return r
}

// Total is the number of answers: one per delivery.
func (r RecordStats) Total() int {
	n := r.Processed + r.Unrecorded + r.Duplicate + r.InProgress + r.NotStarted + r.Failed + r.TimedOut + r.NoAnswer
	for _, o := range r.Other {
		n += o
	}
	return n
}

// InvocationStats are the processor's invocations: how many, how many
// reached their timeout (abandoned there), how many of those were crashes
// the demo injected, and the longest one that ended in time.
type InvocationStats struct {
	Total         int `json:"total"`
	TimedOut      int `json:"timedOut"`
	TimedOutCrash int `json:"timedOutInjectedCrash"`
	// TimedOutChaos is those of the rest with a fault -chaos injected
	// into one of their calls (a delay, or a failure waited out and
	// retried): the injected faults spent their time.
	TimedOutChaos  int     `json:"timedOutInjectedFaults"`
	LongestSeconds float64 `json:"longestSeconds"`
	TimeoutSeconds float64 `json:"timeoutSeconds"`
}

// Window lists the keys whose extra side effects the documented duplicate
// window explains: a side effect whose completion was never recorded (its
// invocation was abandoned at its timeout, or its COMPLETED write failed),
// followed by another only once that invocation's lock could have expired.
type Window struct {
	Keys []WindowKey `json:"keys"`
}

// WindowKey is one key inside the documented window.
type WindowKey struct {
	Key         string `json:"key"`
	SideEffects int    `json:"sideEffects"`
	// Causes explain every side effect of the key but the last, in order.
	Causes []WindowCause `json:"causes"`
	// Injected: every cause is a fault the demo injected (-crash, -chaos).
	// Otherwise the run fails: the demo's own timings made the duplicate.
	Injected bool `json:"injected"`
}

// WindowCause is why one side effect's completion was never recorded.
type WindowCause struct {
	RequestID string `json:"requestId"`
	Cause     string `json:"cause"`
	Injected  bool   `json:"injected"`
}

// Evaluation is what Summarize needs beyond the workload and ledger.
type Evaluation struct {
	Mode    string
	Seed    uint64
	Timings Timings
	// LockHold is the least time the processor's lock is held after its
	// invocation started; no second side effect can come sooner.
	LockHold time.Duration
	// RetriesOverride is set when -max-receive-count or -max-attempts chose
	// the retry budget: a processable key whose every copy ran out of retries
	// before it could run is then reported, not failed.
	RetriesOverride bool
	// Ceiling returns the replay delay ceiling of attempt n in seconds.
	Ceiling func(n int) float64
	Ledger  string
	Logs    string
	// Transactional is set with -tx: the side effects Summarize is given
	// are then the business table's items.
	Transactional *Transactional
	// Stage2 is set with -emit and -emit-inline: the second stage's
	// shipments and deliveries.
	Stage2 *Stage2
}

// Transactional is -tx's evaluation: the business table, and the side
// effects the handler staged (the ledger), committed or not.
type Transactional struct {
	Table  string
	Staged []Entry
}

// newSummary fills what both modes report the same way: the workload, the
// timings, what is left in the queues and the operator queue's arrivals. A
// send that reached the operator queue twice is a note, not a violation: it
// is a documented limit (nothing is lost), but an operator would see it twice.
func newSummary(mode string, seed uint64, w Workload, obs Observed, t Timings) Summary {
	s := Summary{
		Mode:            mode,
		Seed:            seed,
		RunID:           w.RunID,
		DurationSeconds: obs.Elapsed.Seconds(),
		Workload:        w.Stats(),
		Timings:         t,
		Sent:            len(w.Sends),
		UniqueKeys:      len(w.Keys),
		LeftInQueues:    obs.Left,
		Operator:        OpStats{ByReason: map[string]int{}},
		Replays:         ReplayStats{ByAttempt: []ReplayAttempt{}},
		Window:          Window{Keys: []WindowKey{}},
		Violations:      []string{},
		Unexpected:      []string{},
	}
	if s.LeftInQueues == nil {
		s.LeftInQueues = map[string]int{}
	}
	for _, snd := range w.Sends {
		if obs.Acked[snd.ID] || len(obs.Operator[snd.ID]) > 0 {
			s.Resolved++
		}
	}
	for _, send := range slices.Sorted(maps.Keys(obs.Operator)) {
		as := obs.Operator[send]
		s.Operator.Total += len(as)
		for _, a := range as {
			s.Operator.ByReason[reasonOrUnknown(a.Reason)]++
		}
		if len(as) > 1 {
			s.Unexpected = append(s.Unexpected, fmt.Sprintf("send %s reached the operator queue %d times (%s): a forward SQS accepted but whose invocation ended before it was acknowledged is sent again (docs/guarantees.md, limit 7)", send, len(as), joinArrivals(as)))
		}
	}
	return s
}

// Summarize checks the invariants: every key's side effect exactly once
// (extra ones only inside the documented window, none missing), every send
// processed or at the operator queue once, the queues drained.
func Summarize(w Workload, ledger []Entry, obs Observed, ev Evaluation) Summary {
	s := newSummary(ev.Mode, ev.Seed, w, obs, ev.Timings)
	s.Deliveries, s.DeadLettered = obs.Deliveries, obs.DeadLettered
	s.Ledger, s.Logs = ev.Ledger, ev.Logs
	made := ledger
	if tx := ev.Transactional; tx != nil {
		// A crashed invocation's effect is staged, never committed: the
		// ledger names the crashed invocations.
		made = tx.Staged
		s.Transactional = txStats(tx, ledger)
	}
	s.observeRuntime(obs, made)
	from := "the ledger"
	if ev.Transactional != nil {
		from = "the business table " + ev.Transactional.Table
	}
	s.Checked = []string{
		"side effects per key, from " + from,
		"every message processed or at the operator queue once (lost: 0)",
		"main queue and dead-letter queue drained",
	}
	effects := s.groupLedger(w, ledger)
	s.checkKeys(w, effects, obs, ev)
	s.checkSends(w, effects, obs)
	s.Processed = s.Records.Processed + s.Records.Unrecorded
	s.DuplicatesSuppressed = s.Records.Duplicate
	s.checkHealthyDeadLettered(w, obs, ev.RetriesOverride)
	s.checkInjected()
	if ev.Stage2 != nil {
		s.checkStage2(w, effects, ev.Stage2)
	}
	s.Replays = replayStats(obs.Replays, ev.Ceiling)
	for _, es := range effects {
		if slices.ContainsFunc(es, func(e Entry) bool { return e.ReplayCount != "" }) {
			s.Replays.Rescued++
		}
	}
	s.finish()
	return s
}

// groupLedger returns each key's side effects in ledger order.
func (s *Summary) groupLedger(w Workload, ledger []Entry) map[string][]Entry {
	keys := w.KeyIndex()
	effects := map[string][]Entry{}
	for _, e := range ledger {
		effects[e.Key] = append(effects[e.Key], e)
		if _, ok := keys[e.Key]; !ok {
			s.Violations = append(s.Violations, fmt.Sprintf("ledger entry %d is for %q, a key this run never sent", e.Seq, e.Key))
		}
	}
	for _, es := range effects {
		slices.SortFunc(es, func(a, b Entry) int { return a.Seq - b.Seq })
	}
	s.SideEffects = SideEffects{Total: len(ledger), KeysByCount: map[string]int{}}
	return effects
}

// checkKeys counts each key's side effects and fails a processable key with
// none, or any key with a duplicate the documented window does not explain.
func (s *Summary) checkKeys(w Workload, effects map[string][]Entry, obs Observed, ev Evaluation) {
	h := newHistory(obs)
	sendsOf := map[string][]Send{}
	for _, snd := range w.Sends {
		sendsOf[snd.Key] = append(sendsOf[snd.Key], snd)
	}
	atOperator := map[string][]Arrival{}
	for _, as := range obs.Operator {
		for _, a := range as {
			atOperator[a.Key] = append(atOperator[a.Key], a)
		}
	}
	// Keys with no side effect although their handler succeeds, named in
	// one violation each way: a run that fails for a cause fails for
	// hundreds of keys, and a thousand lines would hide the cause.
	var exhausted, missing []string
	for _, k := range w.Keys {
		es := effects[k.ID]
		s.SideEffects.KeysByCount[strconv.Itoa(len(es))]++
		switch {
		case len(es) == 1:
			s.SideEffects.ExactlyOnce++
		case len(es) == 0 && (k.Kind == Poison || k.Kind == Permanent):
			s.SideEffects.None++
		case len(es) == 0 && !slices.ContainsFunc(sendsOf[k.ID], func(snd Send) bool { return !obs.Unsent[snd.ID] }):
			// Never sent: counted by checkSends, explained by the run's
			// own violation (it gave up).
		case len(es) == 0:
			allAtOperator := !slices.ContainsFunc(sendsOf[k.ID], func(snd Send) bool { return len(obs.Operator[snd.ID]) == 0 })
			if allAtOperator && ev.RetriesOverride {
				s.SideEffects.Exhausted++
				break
			}
			if allAtOperator {
				exhausted = append(exhausted, k.ID)
			} else {
				missing = append(missing, k.ID)
			}
		case ev.Transactional != nil:
			// Each effect commits with its key's completion, which only
			// one holder can write: no window explains a second.
			s.SideEffects.Multiple++
			s.Violations = append(s.Violations, fmt.Sprintf("key %s: %d side effects committed in the business table, where the transaction allows one (seq %s)", k.ID, len(es), joinSeqs(es)))
		default:
			s.SideEffects.Multiple++
			wk, problem := h.explain(k, es, ev.LockHold)
			if problem != "" {
				s.Violations = append(s.Violations, fmt.Sprintf("key %s: %d side effects, a duplicate outside the documented window: %s", k.ID, len(es), problem))
				break
			}
			s.SideEffects.InWindow++
			s.Window.Keys = append(s.Window.Keys, wk)
		}
		s.Unexpected = append(s.Unexpected, expectation(k, es, atOperator[k.ID], oneEffectPerCrash(ev))...)
	}
	if len(missing) > 0 {
		s.Violations = append(s.Violations, fmt.Sprintf("%s %s no side effect, although their handler succeeds: %s", count(len(missing), "key"), verb(len(missing), "has", "have"), firstFew(missing)))
	}
	if len(exhausted) > 0 {
		s.Violations = append(s.Violations, fmt.Sprintf("%s %s no side effect, although their handler succeeds: every copy ran out of retries and is at the operator queue (the template's retry budget should cover it): %s", count(len(exhausted), "key"), verb(len(exhausted), "has", "have"), firstFew(exhausted)))
	}
	sort.Slice(s.Window.Keys, func(i, j int) bool { return s.Window.Keys[i].Key < s.Window.Keys[j].Key })
}

// txStats counts the staged side effects that are not in the table.
func txStats(tx *Transactional, committed []Entry) *TxStats {
	in := map[int]bool{}
	for _, e := range committed {
		in[e.Seq] = true
	}
	st := &TxStats{Table: tx.Table, Staged: len(tx.Staged)}
	for _, e := range tx.Staged {
		if !in[e.Seq] {
			st.Uncommitted++
			if e.Crash {
				st.CrashedUncommitted++
			}
		}
	}
	return st
}

func joinSeqs(es []Entry) string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = strconv.Itoa(e.Seq)
	}
	return strings.Join(parts, ", ")
}

// checkSends accounts for every send: deleted by the processor once its
// key's side effect happened, at the operator queue, or lost.
func (s *Summary) checkSends(w Workload, effects map[string][]Entry, obs Observed) {
	var neverDeleted []string
	for _, snd := range w.Sends {
		switch {
		case len(obs.Operator[snd.ID]) > 0:
		case obs.Acked[snd.ID] && len(effects[snd.Key]) > 0:
		case obs.Unsent[snd.ID]:
			s.NotSent++
		case obs.Acked[snd.ID]:
			s.Lost++
			s.LostSends = append(s.LostSends, snd.ID+" (deleted from the main queue, but its key has no side effect and it is not at the operator queue)")
		default:
			neverDeleted = append(neverDeleted, snd.ID)
		}
	}
	// A run that gave up with messages still queued has not lost them: as
	// many of the sends never deleted as the queues hold are counted there
	// (left in queues, its own violation), the rest are lost.
	left := 0
	for _, n := range obs.Left {
		left += n
	}
	queued := min(left, len(neverDeleted))
	if queued == len(neverDeleted) {
		return
	}
	s.Lost += len(neverDeleted) - queued
	where := "never deleted by the processor, not at the operator queue"
	if queued > 0 {
		where += ": one of the messages left in the queues, or lost"
	}
	for _, id := range neverDeleted {
		s.LostSends = append(s.LostSends, id+" ("+where+")")
	}
}

// history is what the pipeline recorded about invocations and completion
// writes: what tells the documented window from a broken lock.
type history struct {
	invocations map[string]InvocationInfo
	// completedAt is when each key's first accepted completion was sent.
	completedAt map[string]time.Time
	completedBy map[[2]string]bool // {key, request id}: completion accepted
	failedBy    map[[2]string]bool // {key, request id}: completion refused
	faulted     map[string]bool    // keys whose COMPLETED write -chaos faulted
	// faultedInv are the invocations with a fault -chaos injected into any
	// of their calls, for whichever key: what spent their time.
	faultedInv map[string]bool
}

func newHistory(obs Observed) history {
	h := history{invocations: obs.Invocations, completedAt: map[string]time.Time{}, completedBy: map[[2]string]bool{}, failedBy: map[[2]string]bool{}, faulted: obs.FaultedCompletions, faultedInv: obs.FaultedInvocations}
	for _, c := range obs.Completions {
		id := [2]string{c.Key, c.RequestID}
		if !c.OK {
			h.failedBy[id] = true
			continue
		}
		h.completedBy[id] = true
		if at, ok := h.completedAt[c.Key]; !ok || c.At.Before(at) {
			h.completedAt[c.Key] = c.At
		}
	}
	return h
}

// explain accepts a key's repeated side effects (in ledger order) only as the
// documented window: none after the key's completion was recorded; each but
// the last made by an invocation that never recorded its completion, because
// it was abandoned at its timeout or its COMPLETED write failed; and each
// next one no sooner than that invocation's lock could expire. Otherwise it
// returns what broke.
func (h history) explain(k Key, es []Entry, lockHold time.Duration) (WindowKey, string) {
	wk := WindowKey{Key: k.ID, SideEffects: len(es)}
	if at, ok := h.completedAt[k.ID]; ok {
		for _, e := range es {
			if e.At.After(at) {
				return wk, fmt.Sprintf("side effect #%d (invocation %s) came %s after the key's completion was recorded", e.Seq, e.RequestID, e.At.Sub(at).Round(time.Millisecond))
			}
		}
	}
	wk.Injected = true
	for i, e := range es[:len(es)-1] {
		next := es[i+1]
		inv, known := h.invocations[e.RequestID]
		var cause string
		injected := false
		switch id := [2]string{k.ID, e.RequestID}; {
		case !known:
			return wk, fmt.Sprintf("side effect #%d came from invocation %q, which no event source mapping reported", e.Seq, e.RequestID)
		case h.completedBy[id]:
			return wk, fmt.Sprintf("invocation %s recorded the completion of side effect #%d, yet #%d followed", e.RequestID, e.Seq, next.Seq)
		case inv.Abandoned && e.Crash:
			cause, injected = "abandoned at its timeout: crash injected", true
		case inv.Abandoned && h.faultedInv[e.RequestID]:
			cause, injected = "abandoned at its timeout: -chaos injected faults into its calls, which spent its time", true
		case inv.Abandoned:
			cause = "abandoned at its timeout, with no crash injected: the machine was too slow for it"
		case h.failedBy[id] && h.faulted[k.ID]:
			cause, injected = "its COMPLETED write failed: -chaos injected a fault into it", true
		case h.failedBy[id] && h.faultedInv[e.RequestID]:
			cause, injected = "its COMPLETED write failed: it ran out of time, spent by faults -chaos injected into its invocation's calls", true
		case h.failedBy[id]:
			cause = "its COMPLETED write failed, with no fault injected: it ran out of time"
		default:
			return wk, fmt.Sprintf("invocation %s made side effect #%d and ended without recording its completion, and #%d followed", e.RequestID, e.Seq, next.Seq)
		}
		if gap := next.At.Sub(inv.Started); gap < lockHold {
			return wk, fmt.Sprintf("side effect #%d came %s after invocation %s started, before its lock (held at least %s) could expire", next.Seq, gap.Round(time.Millisecond), e.RequestID, lockHold)
		}
		wk.Causes = append(wk.Causes, WindowCause{RequestID: e.RequestID, Cause: cause, Injected: injected})
		wk.Injected = wk.Injected && injected
	}
	return wk, ""
}

// observeRuntime fills what both modes report of the processor's run: its
// per-record outcomes, its invocations (ledger names the crashed ones; nil
// without a business handler) and what -chaos injected.
func (s *Summary) observeRuntime(obs Observed, ledger []Entry) {
	s.Records, s.Chaos = recordStats(obs.Receipts), obs.Chaos
	s.Records.InProgressHidden = obs.InProgressHidden
	s.Invocations = invocationStats(obs.Invocations, obs.FaultedInvocations, ledger, s.Timings)
}

// invocationStats counts the processor's invocations. An abandoned one that
// made a crash key's side effect is the demo's injected crash; one with a
// fault -chaos injected into any of its calls (faulted) ran out of the time
// those faults spent; any other reached its timeout because the machine was
// slower than the timings.
func invocationStats(invs map[string]InvocationInfo, faulted map[string]bool, ledger []Entry, t Timings) InvocationStats {
	crashed := map[string]bool{}
	for _, e := range ledger {
		if e.Crash {
			crashed[e.RequestID] = true
		}
	}
	st := InvocationStats{Total: len(invs), TimeoutSeconds: t.FunctionTimeoutSeconds}
	for id, inv := range invs {
		switch {
		case inv.Abandoned && crashed[id]:
			st.TimedOut++
			st.TimedOutCrash++
		case inv.Abandoned && faulted[id]:
			st.TimedOut++
			st.TimedOutChaos++
		case inv.Abandoned:
			st.TimedOut++
		default:
			st.LongestSeconds = max(st.LongestSeconds, inv.Duration.Seconds())
		}
	}
	return st
}

// checkInjected fails the run for duplicates that no injected fault
// explains: the documented window opened by the demo's own timings (an
// invocation abandoned at its timeout, a completion write out of time) is
// not what the demo exists to show, and a user must not read it as OK.
func (s *Summary) checkInjected() {
	var keys []string
	for _, k := range s.Window.Keys {
		if !k.Injected {
			keys = append(keys, k.Key)
		}
	}
	s.failUninjected(keys, "had a duplicate side effect that no injected fault explains")
}

// failUninjected adds the violation for keys run (or forwarded) twice by
// nothing the demo injected, and, when the run failed with signs of a slow
// machine, the explanation and the flag that gives more headroom.
func (s *Summary) failUninjected(keys []string, what string) {
	if len(keys) > 0 {
		const most = 10
		named := strings.Join(keys[:min(len(keys), most)], ", ")
		if len(keys) > most {
			named += fmt.Sprintf(" and %d more", len(keys)-most)
		}
		s.Violations = append(s.Violations, fmt.Sprintf("%s %s (%s): an invocation the demo did not mean to kill lost its completion", count(len(keys), "key"), what, named))
	}
	slow := s.Invocations.TimedOut - s.Invocations.TimedOutCrash - s.Invocations.TimedOutChaos
	if len(s.Violations) == 0 || (slow == 0 && s.Records.NotStarted == 0 && len(keys) == 0) {
		return
	}
	var signs []string
	if slow > 0 {
		signs = append(signs, fmt.Sprintf("%s reached the %s function timeout without an injected crash", count(slow, "invocation"), secs(s.Invocations.TimeoutSeconds)))
	}
	if s.Records.NotStarted > 0 {
		signs = append(signs, fmt.Sprintf("%s %s not started because their invocation's time ran short", count(s.Records.NotStarted, "record"), verb(s.Records.NotStarted, "was", "were")))
	}
	if len(keys) > 0 {
		signs = append(signs, fmt.Sprintf("%s ran twice because such an invocation could not record its completion", count(len(keys), "key")))
	}
	s.Headroom = strings.Join(signs, "; ") + ". " +
		"This machine is slower than the demo's timings assume (moto_server is one Python process; other CPU-bound work starves it). " +
		"An invocation that runs out of time leaves its key's lock to expire, and the next delivery runs the side effect again: " +
		"the duplicate window sqs-once documents (docs/guarantees.md, limit 1), here caused by the timings, not by a fault the demo injected. " +
		fmt.Sprintf("Run again with more headroom: -function-timeout %s (the lock and visibility timeouts follow it).", suggestTimeout(s.Invocations.TimeoutSeconds))
}

// suggestTimeout is a function timeout with more headroom than t seconds.
func suggestTimeout(t float64) string {
	return secs(min(max(2.5*t, 15), maxFunctionTimeout.Seconds()))
}

// secs writes seconds as a duration flag would take them.
func secs(t float64) string {
	return time.Duration(t * float64(time.Second)).Round(time.Millisecond).String()
}

// finish adds the invariants common to both modes, lost and drained, and
// sets OK.
func (s *Summary) finish() {
	if s.Lost > 0 {
		s.Violations = append(s.Violations, fmt.Sprintf("lost: %s neither processed nor at the operator queue", count(s.Lost, "message")))
	}
	for _, q := range slices.Sorted(maps.Keys(s.LeftInQueues)) {
		if n := s.LeftInQueues[q]; n > 0 {
			s.Violations = append(s.Violations, fmt.Sprintf("the %s queue still holds %s", q, count(n, "message")))
		}
	}
	const most = 20
	if len(s.LostSends) > most {
		s.LostSends = append(s.LostSends[:most], fmt.Sprintf("... and %d more", len(s.LostSends)-most))
	}
	s.OK = len(s.Violations) == 0
}

// expectation compares a key's outcome with what its kind was built to show.
//
// oneEffect: a crash key was made to crash where it shows one side effect
// (-tx before its commit, -emit after it), not two.
func expectation(k Key, es []Entry, ops []Arrival, oneEffect bool) []string {
	var out []string
	only := func(reason string) bool {
		return len(ops) > 0 && !slices.ContainsFunc(ops, func(a Arrival) bool { return a.Reason != reason })
	}
	switch k.Kind {
	case Poison:
		if !only("max-attempts") {
			out = append(out, fmt.Sprintf("poison key %s did not reach the operator queue with reason max-attempts only (%s)", k.ID, joinArrivals(ops)))
		}
	case Permanent:
		if !only("permanent-error") {
			out = append(out, fmt.Sprintf("permanent key %s did not reach the operator queue with reason permanent-error only (%s)", k.ID, joinArrivals(ops)))
		}
	case Normal, Transient:
		if len(ops) > 0 {
			out = append(out, fmt.Sprintf("%s key %s reached the operator queue (%s) although its handler succeeds", k.Kind, k.ID, reasonOrUnknown(ops[0].Reason)))
		}
		// With -tx the crash comes before the commit, with -emit after
		// it, so one effect is what a crash key shows (fewer or more is a
		// violation already).
		if k.Crash && len(es) < 2 && !oneEffect {
			out = append(out, fmt.Sprintf("key %s was made to crash after its side effect but has %s", k.ID, count(len(es), "side effect")))
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

func joinArrivals(as []Arrival) string {
	if len(as) == 0 {
		return "no arrival"
	}
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = fmt.Sprintf("%s as %s", reasonOrUnknown(a.Reason), a.MessageID)
	}
	return strings.Join(parts, ", ")
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
	s.renderSetup(p)
	s.renderChaos(p)
	s.renderOutcomes(p)
	s.renderVerdict(p)
	return b.String()
}

type printer func(format string, args ...any)

func mark(ok bool) string {
	if ok {
		return "ok"
	}
	return "FAIL"
}

// renderSetup says what ran, with which timings, and the workload.
func (s Summary) renderSetup(p printer) {
	wl, t := s.Workload, s.Timings
	p("")
	where := "the template's stack on a local AWS emulator (moto_server)"
	if s.Mode == "stack" {
		where = "a deployed stack"
	}
	p("sqs-once demo, run %s (seed %d), %.1f s: %s", s.RunID, s.Seed, s.DurationSeconds, where)
	lock := secs(float64(t.LockTimeoutSeconds)) + " (renewed while the handler runs)"
	if t.LockTimeoutSeconds == 0 {
		lock = "until the invocation's deadline + 5s"
	}
	p("  timings             function timeout %s, lock %s, visibility timeout %s", secs(t.FunctionTimeoutSeconds), lock, secs(float64(t.VisibilityTimeoutSeconds)))
	p("  retries             %s", retries(t))
	if s.Mode == "local" {
		p("                      (the demo's own timings and retries: shorter than the template's defaults, so that a run is short)")
	}
	if s.Target != nil {
		s.renderTargetSetup(p)
	}
	p("")
	p("sent                  %s for %s", count(s.Sent, "message"), count(s.UniqueKeys, "unique key"))
	p("  re-sends            %s sent 2-3 times: %s with new messageIds, %d of them at the same time as the first", count(wl.DuplicateKeys, "key"), count(wl.ExtraCopies, "extra copy"), wl.Concurrent)
	if s.Target != nil {
		p("  failing keys        none: with a target no business handler runs (no poison, transient, permanent or crash)")
	} else {
		s.renderHandlerKeys(p)
	}
	p("")
}

// retries says where a failing message goes, in the order it goes there.
func retries(t Timings) string {
	out := fmt.Sprintf("a failing message goes to the dead-letter queue after %s", count(t.MaxReceiveCount, "receive"))
	if t.MaxAttempts == 0 {
		return out + ", then straight to the operator queue"
	}
	base, most := secs(t.BackoffBaseSeconds), secs(float64(t.MaxDelaySeconds))
	delays := fmt.Sprintf("%s jitter, base %s, rate %g, at most %s", t.Jitter, base, t.BackoffRate, most)
	if t.Jitter == "none" {
		delays = fmt.Sprintf("base %s, rate %g, at most %s, no jitter", base, t.BackoffRate, most)
	}
	times := fmt.Sprintf("up to %d times", t.MaxAttempts)
	if t.MaxAttempts == 1 {
		times = "at most once"
	}
	return out + fmt.Sprintf("; the replayer sends it back %s (delays: %s), then to the operator queue", times, delays)
}

// renderHandlerKeys is the keys the demo's business handler makes fail.
func (s Summary) renderHandlerKeys(p printer) {
	wl := s.Workload
	p("  poison              %s whose handler always fails", count(wl.Poison, "key"))
	p("  transient           %s that %s a few times, then %s", count(wl.Transient, "key"), verb(wl.Transient, "fails", "fail"), verb(wl.Transient, "succeeds", "succeed"))
	p("  permanent           %s the handler rejects as permanently invalid", count(wl.Permanent, "key"))
	switch {
	case wl.Crash > 0 && s.Stage2 != nil && s.Stage2.Mode == EmitStaged:
		p("  crash               %s whose invocation hangs after its commit, in the send of its OrderAccepted, until the function timeout:", count(wl.Crash, "key"))
		p("                      alternately before the message left and after it reached the queue, before the send's answer")
	case wl.Crash > 0 && s.Transactional != nil:
		p("  crash               %s whose invocation hangs after staging the side effect, before its commit, until the function timeout", count(wl.Crash, "key"))
	case wl.Crash > 0:
		p("  crash               %s whose invocation hangs after the side effect, until the function timeout", count(wl.Crash, "key"))
	}
}

// renderOutcomes is where every key and message ended.
func (s Summary) renderOutcomes(p printer) {
	switch {
	case s.Target != nil:
		s.renderTargetOutcomes(p)
	case s.Mode == "stack":
		p("completed keys        %s COMPLETED", count(s.Processed, "idempotency record"))
	default:
		se := s.SideEffects
		if tx := s.Transactional; tx != nil {
			p("side effects          %d committed in the business table %s, each in one transaction with its key's completion (-tx)", se.Total, tx.Table)
			p("  staged              %d by the handler (%s); %d never committed, %d of them by an invocation the demo crashed before its commit", tx.Staged, strings.TrimSpace("ledger "+s.Ledger), tx.Uncommitted, tx.CrashedUncommitted)
		} else {
			p("side effects          %s", strings.TrimSpace(fmt.Sprintf("%d in the ledger %s", se.Total, s.Ledger)))
		}
		p("  exactly once        %s", count(se.ExactlyOnce, "key"))
		none := count(se.None, "poison and permanent key")
		if se.None == 1 {
			none = "1 poison or permanent key"
		}
		p("  none                %s, as built", none)
		if se.Exhausted > 0 {
			p("  retries ran out     %s never ran: every copy is at the operator queue (-max-receive-count/-max-attempts)", count(se.Exhausted, "processable key"))
		}
		if s.Transactional != nil {
			p("  more than once      %s  [%s]", count(se.Multiple, "key"), mark(se.Multiple == 0))
		} else {
			p("  more than once      %s: %d inside the duplicate window, %d outside  [%s]", count(se.Multiple, "key"), se.InWindow, se.Multiple-se.InWindow, mark(se.Multiple == se.InWindow))
		}
		s.renderRuntime(p)
		p("dead-lettered         %s reached the dead-letter queue", count(s.DeadLettered, "message"))
		s.renderHealthyDeadLettered(p)
		p("replays               %d sent back to the main queue by the DLQ replayer; %s succeeded on a replay", s.Replays.Total, count(s.Replays.Rescued, "key"))
		for _, a := range s.Replays.ByAttempt {
			p("  replay %-3d          %d, delays drawn %s s (ceiling %g s)", a.Attempt, a.Count, joinInts(a.Delays), a.CeilingSeconds)
		}
	}
	p("operator queue        %s", count(s.Operator.Total, "message"))
	for _, r := range slices.Sorted(maps.Keys(s.Operator.ByReason)) {
		p("  %-19s %d", r, s.Operator.ByReason[r])
	}
	if s.Mode == "stack" {
		p("  other messages      %d of other producers seen there and left alone", s.Foreign)
	}
	if s.Resolved != s.Sent {
		end := "deleted by the processor"
		if s.Mode == "stack" {
			end = "completed"
		}
		p("done                  %d of %s reached an end: %s, or at the operator queue", s.Resolved, count(s.Sent, "message"), end)
	}
	p("lost                  %d  [%s]", s.Lost, mark(s.Lost == 0))
	for _, l := range s.LostSends {
		p("  %s", l)
	}
	if s.NotSent > 0 {
		p("not sent              %d: the run gave up before sending them", s.NotSent)
	}
	left := 0
	for _, n := range s.LeftInQueues {
		left += n
	}
	p("left in queues        %d  [%s]", left, mark(left == 0))
	s.renderStage2(p)
	p("")
	s.renderWindow(p)
}

// renderWindow is the keys with more than one side effect and what caused
// each: a fault the demo injected, or its own timings (which fails the run).
func (s Summary) renderWindow(p printer) {
	if len(s.Window.Keys) == 0 {
		if s.Mode == "local" && s.Target == nil {
			p("duplicate window      not hit: no key had a second side effect")
		}
		return
	}
	injected := 0
	for _, k := range s.Window.Keys {
		if k.Injected {
			injected++
		}
	}
	p("duplicate window      %s had a second side effect: the side effect before it never had its", count(len(s.Window.Keys), "key"))
	p("                      completion recorded, and the next came only once its lock could have expired")
	p("                      (docs/guarantees.md, limit 1). %d %s caused by a fault the demo", injected, verb(injected, "was", "were"))
	p("                      injected (-crash, -chaos); %d by nothing it injected  [%s]", len(s.Window.Keys)-injected, mark(injected == len(s.Window.Keys)))
	for _, k := range s.Window.Keys {
		causes := make([]string, len(k.Causes))
		for i, c := range k.Causes {
			causes[i] = fmt.Sprintf("invocation %s %s", c.RequestID, c.Cause)
		}
		p("  %-19s %d side effects; %s", k.Key, k.SideEffects, strings.Join(causes, "; "))
	}
}

// renderRuntime is the processor's invocations, and its answer to every
// record delivered to it: each delivery is on exactly one of the lines
// under "records" ("hidden" is part of "in progress"), so they add up.
func (s Summary) renderRuntime(p printer) {
	iv, r := s.Invocations, s.Records
	p("invocations           %d of the processor; the longest that ended in time took %.1f s of its %s timeout", iv.Total, iv.LongestSeconds, secs(iv.TimeoutSeconds))
	other := iv.TimedOut - iv.TimedOutCrash - iv.TimedOutChaos
	if iv.TimedOutChaos > 0 {
		p("  timed out           %d: %s the demo injected, %d slowed by faults -chaos injected, %d by nothing it injected  [%s]", iv.TimedOut, count(iv.TimedOutCrash, "crash"), iv.TimedOutChaos, other, mark(other == 0))
	} else {
		p("  timed out           %d: %s the demo injected, %d it did not  [%s]", iv.TimedOut, count(iv.TimedOutCrash, "crash"), other, mark(other == 0))
	}
	p("records               %d delivered to the processor (re-sends, retries and redeliveries included), each answered once:", s.Deliveries)
	ran, skipped, failed := "ran the handler to completion", "running the handler", "the handler failed: retried, or sent to the operator queue if permanent"
	if s.Target != nil {
		ran, skipped, failed = "delivered to the target", "forwarding them", "the target failed or refused them: retried, or sent to the operator queue if refused for good"
	}
	p("  processed           %d %s (%d of them without their completion recorded)", r.Processed+r.Unrecorded, ran, r.Unrecorded)
	p("  duplicate           %d answered \"duplicate\": suppressed, deleted without %s", r.Duplicate, skipped)
	p("  in progress         %d answered \"in progress\": another invocation held the key; retried", r.InProgress)
	p("    hidden            %d of them hidden until the holder's lock could be taken over (metric InProgressHidden)", r.InProgressHidden)
	p("  failed              %d %s", r.Failed, failed)
	if r.NotStarted > 0 {
		p("  not started         %d: their invocation's time ran short; retried", r.NotStarted)
	}
	if r.TimedOut > 0 {
		p("  timed out           %d: their invocation reached its timeout before the processor answered; delivered again", r.TimedOut)
	}
	if r.NoAnswer > 0 {
		p("  no answer           %d: their invocation failed as a whole; delivered again", r.NoAnswer)
	}
	if len(r.Other) > 0 {
		var names []string
		n := 0
		for _, o := range slices.Sorted(maps.Keys(r.Other)) {
			names = append(names, fmt.Sprintf("%s %d", o, r.Other[o]))
			n += r.Other[o]
		}
		p("  other               %d answered otherwise (see the function log): %s", n, strings.Join(names, ", "))
	}
	if total := r.Total(); total != s.Deliveries {
		// The Tracker records one answer per delivery; a difference means
		// the demo's own bookkeeping is wrong, and the report says so.
		p("  (these add up to %d, not %d: a fault in the demo's counting)", total, s.Deliveries)
	}
}

// renderVerdict is the notes, the violations and the verdict.
func (s Summary) renderVerdict(p printer) {
	if len(s.NotChecked) > 0 {
		p("checked               %s", strings.Join(s.Checked, "; "))
		p("not checked           %s", strings.Join(s.NotChecked, "; "))
	}
	// A run that failed for a cause has a note for hundreds of keys; the
	// first few say what kind, -json has them all.
	const mostNotes = 10
	for i, u := range s.Unexpected {
		if i == mostNotes {
			p("note: ... and %s like these (all of them in -json \"unexpected\")", count(len(s.Unexpected)-mostNotes, "more note"))
			break
		}
		p("note: %s", u)
	}
	if h := s.HealthyDeadLettered; h != nil && h.Finding != "" {
		p("finding: %s", h.Finding)
	}
	for _, v := range s.Violations {
		p("VIOLATION: %s", v)
	}
	if s.Headroom != "" {
		p("why: %s", s.Headroom)
	}
	switch {
	case s.Logs != "":
		p("function logs         %s", s.Logs)
	case s.Removed:
		p("function logs         removed with the run's temporary directory, as the ledger (-keep or -out DIR keeps them)")
	}
	p("")
	switch {
	case !s.OK:
		p("verdict: FAILED: %s broken", count(len(s.Violations), "invariant"))
	case s.Target != nil:
		p("verdict: OK: every key forwarded to the target queue exactly once%s, intact, nothing lost%s", targetSuffix(s.Target), healthySuffix(s))
	case s.Mode == "stack":
		p("verdict: OK: every key sent completed or at the operator queue once, nothing lost (what -stack can check; see \"not checked\")")
	default:
		p("verdict: OK: every key's side effect exactly once%s, nothing lost%s%s", windowSuffix(s), healthySuffix(s), stage2Suffix(s.Stage2))
	}
}

func targetSuffix(ts *TargetStats) string {
	if ts.Explained == 0 {
		return ""
	}
	return fmt.Sprintf(" (except %s that arrived more than once, each copy explained by a documented limit)", count(ts.Explained, "key"))
}

func windowSuffix(s Summary) string {
	var except []string
	if n := len(s.Window.Keys); n > 0 {
		except = append(except, fmt.Sprintf("%s run twice by a fault the demo injected, named above", count(n, "key")))
	}
	if n := s.SideEffects.Exhausted; n > 0 {
		except = append(except, fmt.Sprintf("%d whose retries ran out before they could run, at the operator queue", n))
	}
	if len(except) == 0 {
		return ""
	}
	return " (except " + strings.Join(except, "; ") + ")"
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
