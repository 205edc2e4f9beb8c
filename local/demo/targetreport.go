package demo

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// TargetStats is what reached the target queue of -target sqs, counted per
// key from the queue itself after the run.
type TargetStats struct {
	// Target is TARGET as the processor ran with it; Queue the queue the
	// demo drained.
	Target string `json:"target"`
	Queue  string `json:"queue"`
	// KeysSent and CopiesSent are the workload: keys, and messages sent to
	// the main queue for them (first copies and re-sends).
	KeysSent   int `json:"keysSent"`
	CopiesSent int `json:"copiesSent"`
	// Arrived is the messages found in the target queue.
	Arrived int `json:"arrived"`
	// ExactlyOnce, MoreThanOnce and NeverArrived count keys; Explained is
	// the keys of MoreThanOnce whose every extra copy is explained (see
	// Duplicates), the rest are violations, as NeverArrived is.
	ExactlyOnce  int `json:"exactlyOnce"`
	MoreThanOnce int `json:"moreThanOnce"`
	Explained    int `json:"explained"`
	NeverArrived int `json:"neverArrived"`
	// BodiesIntact and AttributesIntact count arrivals: the body sent, and
	// the attributes sent, byte for byte, with sqs-once-key equal to the
	// body's orderId and a positive sqs-once-fence besides.
	BodiesIntact     int `json:"bodiesIntact"`
	AttributesIntact int `json:"attributesIntact"`
	// SentAttributes are the workload's attributes, "name (data type)".
	SentAttributes []string          `json:"sentAttributes"`
	Duplicates     []TargetDuplicate `json:"duplicates"`
}

// TargetDuplicate is a key that arrived in the target queue more than once.
type TargetDuplicate struct {
	Key      string  `json:"key"`
	Arrivals int     `json:"arrivals"`
	Fences   []int64 `json:"fences"`
	// Causes explain the extra copies; Problem, when set, is what no
	// documented limit explains.
	Causes  []string `json:"causes"`
	Problem string   `json:"problem,omitempty"`
}

// TargetEvaluation is what SummarizeTarget needs beyond Evaluation.
type TargetEvaluation struct {
	Evaluation
	Target, Queue string
	// Message is a send's body and attributes exactly as the producer sent
	// them.
	Message func(Send) (string, map[string]sqstypes.MessageAttributeValue)
}

// SummarizeTarget checks a -target sqs run from what the target queue held:
// every key arrived exactly once (a second copy only where a documented
// limit explains it), each arrival intact, every send forwarded, suppressed
// as a duplicate or at the operator queue, the queues drained.
func SummarizeTarget(w Workload, landings []Landing, obs Observed, fobs ForwardObserved, ev TargetEvaluation) Summary {
	s := newSummary(ev.Mode, ev.Seed, w, obs, ev.Timings)
	s.Deliveries, s.DeadLettered, s.Logs = obs.Deliveries, obs.DeadLettered, ev.Logs
	s.observeRuntime(obs, nil)
	s.Checked = []string{
		"arrivals per key, from the drained target queue",
		"bodies and message attributes byte for byte",
		"every message forwarded, suppressed as a duplicate or at the operator queue (lost: 0)",
		"main queue and dead-letter queue drained",
	}
	s.Replays = replayStats(obs.Replays, ev.Ceiling)
	ts := &TargetStats{Target: ev.Target, Queue: ev.Queue, KeysSent: len(w.Keys), CopiesSent: len(w.Sends), Arrived: len(landings), Duplicates: []TargetDuplicate{}}
	s.Target = ts
	if len(w.Sends) > 0 {
		_, attrs := ev.Message(w.Sends[0])
		for _, name := range slices.Sorted(maps.Keys(attrs)) {
			ts.SentAttributes = append(ts.SentAttributes, fmt.Sprintf("%s (%s)", name, aws.ToString(attrs[name].DataType)))
		}
	}

	byKey, forwarded := s.checkLandings(w, landings, ev.Message)
	h := newHistory(obs)
	var never []string
	for _, k := range w.Keys {
		ls := byKey[k.ID]
		switch {
		case len(ls) == 0:
			ts.NeverArrived++
			never = append(never, k.ID)
		case len(ls) == 1:
			ts.ExactlyOnce++
		default:
			ts.MoreThanOnce++
			d := explainTargetDuplicate(k.ID, ls, fobs, h, obs.Invocations)
			if d.Problem == "" {
				ts.Explained++
			} else {
				s.Violations = append(s.Violations, fmt.Sprintf("key %s arrived %d times in the target queue: %s", k.ID, d.Arrivals, d.Problem))
			}
			ts.Duplicates = append(ts.Duplicates, d)
		}
	}
	if len(never) > 0 {
		s.Violations = append(s.Violations, fmt.Sprintf("%s never arrived in the target queue: %s", count(len(never), "key"), firstFew(never)))
	}
	s.checkTargetSends(w, byKey, forwarded, obs)
	s.checkHealthyDeadLettered(w, obs, ev.RetriesOverride)
	// A copy explained by a documented limit is still one the demo must
	// have caused on purpose: without -chaos nothing injects a lost answer
	// or a failed write, so such a copy comes from the demo's own timings.
	// (With -chaos every explained copy is taken as injected.)
	var uninjected []string
	if obs.Chaos == nil {
		for _, d := range ts.Duplicates {
			if d.Problem == "" {
				uninjected = append(uninjected, d.Key)
			}
		}
	}
	s.failUninjected(uninjected, "arrived more than once in the target queue although the demo injected no fault")
	s.finish()
	return s
}

// checkLandings groups the target queue's messages by key (sqs-once-key,
// else the body's orderId) and counts the intact ones. A message whose body
// is not one this run sent, or whose key attribute disagrees with its body,
// is a violation; altered bodies and attributes are counted and the first
// difference named. forwarded is the sends whose own message arrived.
func (s *Summary) checkLandings(w Workload, landings []Landing, message func(Send) (string, map[string]sqstypes.MessageAttributeValue)) (byKey map[string][]Landing, forwarded map[string]bool) {
	ts := s.Target
	sends := map[string]Send{}
	for _, snd := range w.Sends {
		sends[snd.ID] = snd
	}
	byKey, forwarded = map[string][]Landing{}, map[string]bool{}
	var alteredBody, alteredAttrs []string
	for _, l := range landings {
		b, err := ParseBody(l.Body)
		snd, known := sends[b.Send]
		if err != nil || b.Run != w.RunID || !known {
			s.Violations = append(s.Violations, fmt.Sprintf("message %s in the target queue is not one this run sent: %.120q", l.MessageID, l.Body))
			continue
		}
		forwarded[snd.ID] = true
		key := l.Key()
		if key == "" {
			key = b.OrderID
		}
		byKey[key] = append(byKey[key], l)
		body, attrs := message(snd)
		if l.Body == body {
			ts.BodiesIntact++
		} else {
			alteredBody = append(alteredBody, l.MessageID)
		}
		if diff := attributeDiff(attrs, l, b.OrderID); diff == "" {
			ts.AttributesIntact++
		} else {
			alteredAttrs = append(alteredAttrs, fmt.Sprintf("%s (%s)", l.MessageID, diff))
		}
	}
	if len(alteredBody) > 0 {
		s.Violations = append(s.Violations, fmt.Sprintf("%s arrived with a body other than the one sent: %s", count(len(alteredBody), "message"), firstFew(alteredBody)))
	}
	if len(alteredAttrs) > 0 {
		s.Violations = append(s.Violations, fmt.Sprintf("%s arrived with other attributes than those sent: %s", count(len(alteredAttrs), "message"), firstFew(alteredAttrs)))
	}
	return byKey, forwarded
}

// attributeDiff is the first difference between the attributes sent and
// those that arrived, "" for none: every attribute sent with the same data
// type and value bytes, sqs-once-key equal to the body's orderId, a
// positive sqs-once-fence, and nothing else but the replayer's own
// bookkeeping (a message that went through the DLQ arrives with its replay
// count and original message id, as its consumer would see it).
func attributeDiff(sent map[string]sqstypes.MessageAttributeValue, l Landing, orderID string) string {
	if k := l.Key(); k != orderID {
		return fmt.Sprintf("%s %q, the body's orderId %q", targets.AttrKey, k, orderID)
	}
	if _, ok := l.Fence(); !ok {
		return fmt.Sprintf("%s %q is not a fencing token", targets.AttrFence, aws.ToString(l.Attributes[targets.AttrFence].StringValue))
	}
	for _, name := range slices.Sorted(maps.Keys(sent)) {
		want, got := sent[name], l.Attributes[name]
		if _, ok := l.Attributes[name]; !ok {
			return fmt.Sprintf("%s missing", name)
		}
		if aws.ToString(want.DataType) != aws.ToString(got.DataType) || aws.ToString(want.StringValue) != aws.ToString(got.StringValue) ||
			(want.StringValue == nil) != (got.StringValue == nil) || !bytes.Equal(want.BinaryValue, got.BinaryValue) {
			return fmt.Sprintf("%s is %s, sent as %s", name, attrText(got), attrText(want))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(l.Attributes)) {
		if _, ok := sent[name]; !ok && !slices.Contains(addedOnTheWay, name) {
			return fmt.Sprintf("%s added", name)
		}
	}
	return ""
}

// addedOnTheWay are the attributes a message may gain between the producer
// and the target queue.
var addedOnTheWay = []string{targets.AttrKey, targets.AttrFence, sqsmsg.AttrReplayCount, sqsmsg.AttrOriginalMessageID}

func attrText(v sqstypes.MessageAttributeValue) string {
	if v.StringValue != nil {
		return fmt.Sprintf("%s %q", aws.ToString(v.DataType), *v.StringValue)
	}
	return fmt.Sprintf("%s % x", aws.ToString(v.DataType), v.BinaryValue)
}

// explainTargetDuplicate accepts a key's extra copies in the target queue
// only where a documented limit explains each. The sqs-once-fence of each
// copy names the lock it was sent under:
//   - two copies under one lock are one message sent twice within one
//     delivery: explained only if the SDK made more than one attempt with
//     it (a send whose answer was lost is retried: README, "Put sqs-once in
//     front of an existing consumer", limits);
//   - a copy under a lock that a later lock of the same key followed was
//     delivered, and its completion never recorded: explained only if the
//     target could not confirm it (the lock is then kept until it expires),
//     its invocation was abandoned at its timeout, or its COMPLETED write
//     failed (docs/guarantees.md, limits 1 and 2). A lock that recorded
//     its completion, or whose message the target reported as not sent, or
//     that no delivery of the processor carried, is a problem.
func explainTargetDuplicate(key string, ls []Landing, fobs ForwardObserved, h history, invs map[string]InvocationInfo) TargetDuplicate {
	d := TargetDuplicate{Key: key, Arrivals: len(ls), Causes: []string{}}
	copies := map[int64]int{}
	for _, l := range ls {
		f, ok := l.Fence()
		if !ok {
			d.Problem = fmt.Sprintf("message %s carries no fencing token, so the lock it was sent under is unknown", l.MessageID)
			return d
		}
		copies[f]++
	}
	d.Fences = slices.Sorted(maps.Keys(copies))
	forwardOf := map[int64]Forward{}
	for _, f := range fobs.Forwards {
		if _, seen := forwardOf[f.Fence]; f.Key == key && !seen {
			forwardOf[f.Fence] = f
		}
	}
	for _, fence := range d.Fences {
		if n := copies[fence]; n > 1 {
			attempts := fobs.Attempts[lockID{Key: key, Fence: fence}]
			if attempts < 2 {
				d.Problem = fmt.Sprintf("%d copies under one lock (fence %d), yet the target's SQS client sent it in %s", n, fence, count(attempts, "attempt"))
				return d
			}
			d.Causes = append(d.Causes, fmt.Sprintf("fence %d: one lock's message sent again by the SDK after an attempt whose answer was lost (%s)", fence, count(attempts, "attempt")))
		}
	}
	for i, fence := range d.Fences[:len(d.Fences)-1] {
		next := d.Fences[i+1]
		f, ok := forwardOf[fence]
		id := [2]string{key, f.RequestID}
		switch {
		case !ok:
			d.Problem = fmt.Sprintf("a copy arrived under fence %d, which no delivery of the processor carried", fence)
		case f.Outcome == ForwardFailed:
			d.Problem = fmt.Sprintf("the target reported the message of fence %d (invocation %s) as not sent, yet it arrived", fence, f.RequestID)
		case h.completedBy[id]:
			d.Problem = fmt.Sprintf("invocation %s recorded the completion of fence %d, yet fence %d delivered the key again", f.RequestID, fence, next)
		case f.Outcome == ForwardUnknown:
			d.Causes = append(d.Causes, fmt.Sprintf("fence %d: invocation %s could not confirm the send (outcome unknown), so its lock was kept until it expired and fence %d delivered the message again", fence, f.RequestID, next))
		case invs[f.RequestID].Abandoned:
			d.Causes = append(d.Causes, fmt.Sprintf("fence %d: invocation %s was abandoned at its timeout after the queue accepted the message; fence %d took the expired lock over", fence, f.RequestID, next))
		case h.failedBy[id]:
			d.Causes = append(d.Causes, fmt.Sprintf("fence %d: invocation %s's COMPLETED write failed after the queue accepted the message; fence %d took the lock over", fence, f.RequestID, next))
		default:
			d.Problem = fmt.Sprintf("invocation %s had the message of fence %d accepted and ended without recording its completion, and fence %d followed", f.RequestID, fence, next)
		}
		if d.Problem != "" {
			return d
		}
	}
	return d
}

// checkTargetSends accounts for every send: its own message forwarded,
// suppressed as a duplicate of a key that arrived, at the operator queue,
// or lost.
func (s *Summary) checkTargetSends(w Workload, byKey map[string][]Landing, forwarded map[string]bool, obs Observed) {
	for _, snd := range w.Sends {
		ops := obs.Operator[snd.ID]
		switch {
		case len(ops) > 0:
			s.Unexpected = append(s.Unexpected, fmt.Sprintf("%s reached the operator queue (%s) although the target queue accepts every message", snd.ID, reasonOrUnknown(ops[0].Reason)))
		case obs.Acked[snd.ID] && len(byKey[snd.Key]) > 0:
			if forwarded[snd.ID] {
				s.Processed++
			} else {
				s.DuplicatesSuppressed++
			}
		case obs.Acked[snd.ID]:
			s.Lost++
			s.LostSends = append(s.LostSends, snd.ID+" (deleted from the main queue, but its key never arrived in the target queue and it is not at the operator queue)")
		default:
			s.Lost++
			s.LostSends = append(s.LostSends, snd.ID+" (never deleted by the processor, not at the operator queue)")
		}
	}
}

// firstFew lists up to 10 items, and how many more there are.
func firstFew(items []string) string {
	const most = 10
	if len(items) <= most {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:most], ", ") + fmt.Sprintf(", ... and %d more", len(items)-most)
}

// renderTargetSetup says what the processor does in place of a handler.
func (s Summary) renderTargetSetup(p printer) {
	p("  target %s: the processor runs no handler, it forwards each key's message to that queue", s.Target.Target)
}

// renderTargetOutcomes is what arrived in the target queue, and where every
// message sent ended.
func (s Summary) renderTargetOutcomes(p printer) {
	ts := s.Target
	p("target queue          %s arrived in %s (read as they came, drained at the end)", count(ts.Arrived, "message"), ts.Queue)
	p("  keys sent           %d, in %s (first sends and re-sends with new messageIds)", ts.KeysSent, count(ts.CopiesSent, "copy"))
	p("  exactly once        %s", count(ts.ExactlyOnce, "key"))
	if ts.MoreThanOnce == 0 {
		p("  more than once      0 keys  [ok]")
	} else {
		p("  more than once      %s: %d explained by a documented limit, %d not  [%s]", count(ts.MoreThanOnce, "key"), ts.Explained, ts.MoreThanOnce-ts.Explained, mark(ts.MoreThanOnce == ts.Explained))
	}
	p("  never arrived       %s  [%s]", count(ts.NeverArrived, "key"), mark(ts.NeverArrived == 0))
	p("  bodies intact       %d of %s, byte for byte  [%s]", ts.BodiesIntact, count(ts.Arrived, "message"), mark(ts.BodiesIntact == ts.Arrived))
	p("  attributes intact   %d of %s: %s", ts.AttributesIntact, count(ts.Arrived, "message"), strings.Join(ts.SentAttributes, ", "))
	p("                      byte for byte, plus %s (= the body's orderId) and %s  [%s]", targets.AttrKey, targets.AttrFence, mark(ts.AttributesIntact == ts.Arrived))
	for _, d := range ts.Duplicates {
		what := strings.Join(d.Causes, "; ")
		if d.Problem != "" {
			what = "NOT EXPLAINED: " + d.Problem
		}
		p("  %-19s %d copies, fences %s; %s", d.Key, d.Arrivals, joinInt64s(d.Fences), what)
	}
	p("forwarded             %s sent on to the target queue: per key, the copy that took the lock", count(s.Processed, "message"))
	p("duplicates suppressed %s deleted without being forwarded", count(s.DuplicatesSuppressed, "re-sent message"))
	s.renderRuntime(p)
	p("dead-lettered         %s reached the dead-letter queue", count(s.DeadLettered, "message"))
	s.renderHealthyDeadLettered(p)
	p("replays               %d sent back to the main queue by the DLQ replayer", s.Replays.Total)
}

func joinInt64s(ns []int64) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = fmt.Sprint(n)
	}
	return strings.Join(parts, " ")
}
