package demo

import (
	"fmt"
	"slices"
	"strings"
)

// HealthyDeadLettered is the messages of the workload's healthy keys (Normal:
// their handler succeeds at once; the keys -crash makes hang after their
// side effect are among them) that went through the dead-letter queue. Each
// used up every receive the main queue allows without being processed: the
// target is 0 (a copy refused "in progress" is hidden until the lock can be
// taken over, so a dead holder's lock costs one receive, not all of them).
type HealthyDeadLettered struct {
	// Count is the messages (sends) that went through the DLQ at least
	// once; Keys how many keys they belong to.
	Count  int `json:"count"`
	Keys   int `json:"keys"`
	Target int `json:"target"`
	// FailsRun: a non-zero Count broke an invariant. Under -chaos, or with
	// a retry budget the flags chose, it is a finding instead (Finding).
	FailsRun bool   `json:"failsRun"`
	Finding  string `json:"finding,omitempty"`
	// Messages name each send, with what became of the receives it used up.
	Messages []DeadLetteredSend `json:"messages"`
}

// DeadLetteredSend is one healthy send that went through the DLQ.
type DeadLetteredSend struct {
	Send string `json:"send"`
	Key  string `json:"key"`
	// Trips are its messages the replayer received from the DLQ (a replay
	// is a new message, so a send can make more than one trip).
	Trips []DeadLetterTrip `json:"trips"`
}

// DeadLetterTrip is one message that reached the DLQ: its id (the one it
// had in the main queue; a redrive keeps it) and its deliveries to the
// processor before, each with the processor's answer.
type DeadLetterTrip struct {
	MessageID string    `json:"messageId"`
	Receipts  []Receipt `json:"receipts"`
}

// checkHealthyDeadLettered counts the healthy sends that went through the
// DLQ. Without -chaos and with the demo's retry budget nothing burns a
// receive but sqs-once's own answers and the demo's timings, so each one
// breaks an invariant. Under -chaos an injected fault can burn receives
// (a ReceiveMessage applied whose answer was lost counts as a receive the
// processor never saw; a failed visibility change or delete brings a
// message back early), and with -max-receive-count the user chose the
// budget: a non-zero count is then a finding the report states, not a
// failed run, which a legitimate exhaustion under heavy faults would make
// flaky.
func (s *Summary) checkHealthyDeadLettered(w Workload, obs Observed, retriesOverride bool) {
	h := &HealthyDeadLettered{Messages: []DeadLetteredSend{}}
	s.HealthyDeadLettered = h
	keys := w.KeyIndex()
	seenKeys := map[string]bool{}
	for _, snd := range w.Sends {
		ids := obs.DeadLetters[snd.ID]
		if len(ids) == 0 || keys[snd.Key].Kind != Normal {
			continue
		}
		d := DeadLetteredSend{Send: snd.ID, Key: snd.Key}
		for _, id := range ids {
			rs := slices.Clone(obs.Receipts[id])
			slices.SortStableFunc(rs, func(a, b Receipt) int { return a.Receive - b.Receive })
			if rs == nil {
				rs = []Receipt{}
			}
			d.Trips = append(d.Trips, DeadLetterTrip{MessageID: id, Receipts: rs})
		}
		h.Messages = append(h.Messages, d)
		seenKeys[snd.Key] = true
	}
	h.Count, h.Keys = len(h.Messages), len(seenKeys)
	if h.Count == 0 {
		return
	}
	what := fmt.Sprintf("%s of %s whose handler succeeds went through the dead-letter queue (target 0)", count(h.Count, "message"), count(h.Keys, "key"))
	if obs.Chaos == nil && !retriesOverride {
		h.FailsRun = true
		sends := make([]string, len(h.Messages))
		for i, d := range h.Messages {
			sends[i] = d.Send + " (" + d.Key + ")"
		}
		s.Violations = append(s.Violations, fmt.Sprintf("%s, with no fault injected into the pipeline's calls: each used up the receives the main queue allows without being processed (named above with the processor's answer to each receive; grep a message id in the function log): %s", what, firstFew(sends)))
		return
	}
	var because []string
	if obs.Chaos != nil {
		because = append(because, fmt.Sprintf("-chaos %s injected faults that can burn receives: a ReceiveMessage applied whose answer was lost counts as a receive the processor never saw, and a visibility change or delete that failed brings a message back before its time", obs.Chaos.Level))
	}
	if retriesOverride {
		because = append(because, "-max-receive-count/-max-attempts chose the retry budget, not the demo")
	}
	h.Finding = what + ". Not a failed run: " + strings.Join(because, "; ") +
		". A receive the processor answered \"in progress\" although the lock could already be taken over, or a message refused again right after being hidden, is sqs-once's own doing, not the faults': each message is named above with its receives; grep its message id in the function log."
}

// renderHealthyDeadLettered is the line under "dead-lettered", and each
// healthy message that went through the DLQ with its receives.
func (s Summary) renderHealthyDeadLettered(p printer) {
	h := s.HealthyDeadLettered
	if h == nil {
		return
	}
	verdict := "ok"
	switch {
	case h.FailsRun:
		verdict = "FAIL"
	case h.Count > 0:
		verdict = "finding, see below"
	}
	p("  healthy             %d of them of keys whose handler succeeds (normal keys, crashing ones included); target 0  [%s]", h.Count, verdict)
	const most = 10
	for i, d := range h.Messages {
		if i == most {
			p("  ... and %d more (all of them in -json \"healthyDeadLettered\")", len(h.Messages)-most)
			break
		}
		for _, t := range d.Trips {
			p("  %-19s %s, message %s: %s", d.Key, d.Send, t.MessageID, describeReceipts(t.Receipts, s.Timings.MaxReceiveCount))
		}
	}
}

// describeReceipts says what became of each receive of a message that went
// through the DLQ, receive numbers 1 to maxReceives (or the highest seen):
// the processor's answer, or that the receive never reached it.
func describeReceipts(rs []Receipt, maxReceives int) string {
	byNumber := map[int][]Receipt{}
	last := maxReceives
	for _, r := range rs {
		byNumber[r.Receive] = append(byNumber[r.Receive], r)
		last = max(last, r.Receive)
	}
	var parts []string
	for n := 1; n <= last; n++ {
		if len(byNumber[n]) == 0 {
			parts = append(parts, fmt.Sprintf("receive %d never reached the processor", n))
			continue
		}
		for _, r := range byNumber[n] {
			parts = append(parts, fmt.Sprintf("receive %d %s", n, describeReceipt(r)))
		}
	}
	return strings.Join(parts, ", ")
}

func describeReceipt(r Receipt) string {
	d := r.Outcome
	if d == "" {
		d = "no answer logged"
	}
	switch {
	case r.Abandoned:
		d += " (invocation abandoned at its timeout)"
	case !r.Deleted && slices.Contains([]string{outcomeProcessed, outcomeUnrecorded, outcomeDuplicate}, r.Outcome):
		d += " (not deleted: the delete failed)"
	}
	return d
}

// healthySuffix ends an OK verdict with the finding, if any: a non-zero
// count that did not fail the run is still said where the verdict is read.
func healthySuffix(s Summary) string {
	if h := s.HealthyDeadLettered; h != nil && h.Count > 0 && !h.FailsRun {
		return fmt.Sprintf("; but %s went through the dead-letter queue (target 0): a finding, see above", count(h.Count, "healthy message"))
	}
	return ""
}
