package demo

import (
	"fmt"
	"strings"
)

// Stage2 is the second stage's evaluation (-emit, -emit-inline): its
// queue, its ledger of shipments and every delivery its mapping made.
type Stage2 struct {
	// Mode is EmitStaged or EmitInline.
	Mode string
	// Queue is the second queue's name.
	Queue    string
	Ledger   string
	Ships    []Entry
	Arrivals []arrival2
}

// Stage2Stats is what the second stage did, per key: each order accepted
// by stage 1 must be shipped once.
type Stage2Stats struct {
	Mode   string `json:"mode"`
	Queue  string `json:"queue"`
	Ledger string `json:"ledger,omitempty"`
	// Messages is the distinct messages that arrived on the queue, for
	// Keys keys; Repeats of them carried an emit id an earlier message
	// had (the same emitted message, sent again by a relay).
	Messages int `json:"messages"`
	Keys     int `json:"keys"`
	Repeats  int `json:"repeats"`
	// Deliveries is every delivery to stage 2's processor, redeliveries
	// included.
	Deliveries int `json:"deliveries"`
	// Shipments is the "ship order X" side effects in stage 2's ledger.
	Shipments   int `json:"shipments"`
	ExactlyOnce int `json:"exactlyOnce"`
	// MoreThanOnce is keys shipped twice or more; Explained of them (with
	// -emit-inline only) because stage 1's handler ran twice for the key,
	// inside the duplicate window the demo's crash opened, and sent each
	// time.
	MoreThanOnce int      `json:"moreThanOnce"`
	Explained    int      `json:"explained"`
	Duplicates   []string `json:"duplicates,omitempty"`
	// Missing is keys stage 1 accepted (a side effect in its ledger) that
	// were never shipped.
	Missing     int      `json:"missing"`
	MissingKeys []string `json:"missingKeys,omitempty"`
}

// checkStage2 counts the shipments per key against the keys stage 1
// accepted. With -emit a second shipment is a violation: the emit id
// tells the copies apart, whatever stage 1 did. With -emit-inline it is
// the control's expected outcome when stage 1's handler ran twice in the
// window a crash the demo injected opened; otherwise a violation too.
func (s *Summary) checkStage2(w Workload, effects map[string][]Entry, st *Stage2) {
	out := &Stage2Stats{Mode: st.Mode, Queue: st.Queue, Ledger: st.Ledger, Shipments: len(st.Ships), Deliveries: len(st.Arrivals)}
	s.Stage2 = out
	seenMsg, seenEmit, keys := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, a := range st.Arrivals {
		if seenMsg[a.MessageID] {
			continue
		}
		seenMsg[a.MessageID] = true
		out.Messages++
		keys[a.Key] = true
		if seenEmit[a.EmitID] {
			out.Repeats++
		}
		seenEmit[a.EmitID] = true
	}
	out.Keys = len(keys)
	ships := map[string]int{}
	for _, e := range st.Ships {
		ships[e.Key]++
	}
	window := map[string]bool{}
	for _, k := range s.Window.Keys {
		if k.Injected {
			window[k.Key] = true
		}
	}
	var unexplained, unaccepted []string
	for _, k := range w.Keys {
		n, accepted := ships[k.ID], len(effects[k.ID]) > 0
		switch {
		case n == 0 && accepted:
			out.Missing++
			out.MissingKeys = append(out.MissingKeys, k.ID)
		case n > 0 && !accepted:
			unaccepted = append(unaccepted, k.ID)
		case n == 1:
			out.ExactlyOnce++
		case n > 1:
			out.MoreThanOnce++
			out.Duplicates = append(out.Duplicates, fmt.Sprintf("%s %d", k.ID, n))
			if st.Mode == EmitInline && window[k.ID] && n <= len(effects[k.ID]) {
				out.Explained++
			} else {
				unexplained = append(unexplained, k.ID)
			}
		}
	}
	if len(unexplained) > 0 {
		why := "although each OrderAccepted carries its emit id, which stage 2 is keyed on"
		if st.Mode == EmitInline {
			why = "more shipments than stage 1's handler ran in the window a crash opened"
		}
		s.Violations = append(s.Violations, fmt.Sprintf("stage 2: %s shipped more than once (%s): %s", count(len(unexplained), "key"), firstFew(unexplained), why))
	}
	if out.Missing > 0 {
		s.Violations = append(s.Violations, fmt.Sprintf("stage 2: %s accepted by stage 1 never shipped: %s", count(out.Missing, "key"), firstFew(out.MissingKeys)))
	}
	if len(unaccepted) > 0 {
		s.Violations = append(s.Violations, fmt.Sprintf("stage 2: %s shipped without a side effect in stage 1: %s", count(len(unaccepted), "key"), firstFew(unaccepted)))
	}
	s.Checked = append(s.Checked, "stage 2: every key accepted by stage 1 shipped once, from "+strings.TrimSpace("its ledger "+st.Ledger))
}

// renderStage2 is the second stage's lines.
func (s Summary) renderStage2(p printer) {
	st := s.Stage2
	if st == nil {
		return
	}
	p("stage 2               OrderAccepted messages to the queue %s; a second processor keyed on sqs-once-emit-id ships each order", st.Queue)
	if st.Mode == EmitStaged {
		p("  emitted (-emit)     with sqsonce.Emit: committed with the key's completion, sent after it, relayed by a redelivery if not sent")
		p("  arrived             %s for %s, %d of them a repeat of an emitted message (the same emit id, sent again by a relay: a redelivery, or a re-sent copy that found it pending)", count(st.Messages, "message"), count(st.Keys, "key"), st.Repeats)
	} else {
		p("  sent (-emit-inline) by the handler itself, before its key's completion, with an id of its own per run: the control")
		p("  arrived             %s for %s", count(st.Messages, "message"), count(st.Keys, "key"))
	}
	p("  delivered           %d to stage 2's processor (redeliveries included)", st.Deliveries)
	p("  shipped             %s", strings.TrimSpace(fmt.Sprintf("%d in the ledger %s", st.Shipments, st.Ledger)))
	p("  exactly once        %s", count(st.ExactlyOnce, "key"))
	switch {
	case st.MoreThanOnce == 0:
		p("  more than once      0 keys  [ok]")
	case st.Explained == st.MoreThanOnce:
		p("  more than once      %s (%s): stage 1's handler ran twice in the window its crash opened, and sent", count(st.MoreThanOnce, "key"), strings.Join(st.Duplicates, ", "))
		p("                      each time with a new id: nothing downstream can tell the copies apart (-emit closes this)")
	default:
		p("  more than once      %s (%s)  [FAIL]", count(st.MoreThanOnce, "key"), strings.Join(st.Duplicates, ", "))
	}
	p("  missing             %d  [%s]", st.Missing, mark(st.Missing == 0))
}

// oneEffectPerCrash: a crash key shows one side effect, where a crash
// after it would show two: -tx's crash comes before its commit, -emit's
// after it.
func oneEffectPerCrash(ev Evaluation) bool {
	return ev.Transactional != nil || (ev.Stage2 != nil && ev.Stage2.Mode == EmitStaged)
}

// stage2Suffix is the verdict's word on the second stage.
func stage2Suffix(st *Stage2Stats) string {
	switch {
	case st == nil:
		return ""
	case st.MoreThanOnce == 0:
		return "; stage 2 shipped every order once"
	default:
		return fmt.Sprintf("; stage 2 shipped %s more than once, each after stage 1's handler ran twice (the control: -emit closes this)", count(st.MoreThanOnce, "order"))
	}
}
