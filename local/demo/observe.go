package demo

import (
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sqs-once/sqs-once/internal/local/localesm"
)

// Replay is one dead letter the replayer sent back to the main queue, as
// seen in its SendMessageBatch call.
type Replay struct {
	Send    string `json:"send"`
	Attempt int    `json:"attempt"`
	Delay   int    `json:"delaySeconds"`
}

// Arrival is a message the operator queue received.
type Arrival struct {
	Send        string `json:"send"`
	Key         string `json:"key"`
	MessageID   string `json:"messageId"`
	Reason      string `json:"reason"`
	ReplayCount string `json:"replayCount,omitempty"`
}

// InvocationInfo is what the report needs of one processor invocation.
type InvocationInfo struct {
	Started time.Time
	// Abandoned: the invocation outlived its function timeout (a crash, a
	// hang or a slow batch), so nothing after that point ran for it.
	Abandoned bool
	// Duration is how long it ran (its timeout when abandoned).
	Duration time.Duration
}

// Completion is one COMPLETED write the processor made for a key, as its
// DynamoDB client saw it.
type Completion struct {
	Key       string
	RequestID string
	// At is when the write was sent; OK that DynamoDB accepted it.
	At time.Time
	OK bool
}

// Tracker collects what the pipeline did, from the event source mappings'
// invocations, the replayer's send calls, the processor's completion writes
// and the operator queue. It is safe for concurrent use.
type Tracker struct {
	mu          sync.Mutex
	acked       map[string]bool
	deliveries  int
	replays     []Replay
	operator    map[string][]Arrival
	invocations map[string]InvocationInfo
	completions []Completion
	foreign     map[string]bool
	timedOut    int
	// deadLetter maps each message the replayer received from the DLQ to
	// its send ("" for a message of no send of this run).
	deadLetter map[string]string
	// receipts are each main-queue message's deliveries to the processor,
	// in order, each with the answer it had when its invocation ended;
	// answers the outcome the processor logged last for a record of an
	// invocation still running, by {request id, message id}, and answered
	// how many of those answers each outcome has (the progress line's).
	receipts map[string][]Receipt
	answers  map[[2]string]string
	answered map[string]int
	// hidden is the processor's InProgressHidden metric, summed.
	hidden int
}

// NewTracker returns an empty Tracker.
func NewTracker() *Tracker {
	return &Tracker{
		acked:       map[string]bool{},
		deadLetter:  map[string]string{},
		receipts:    map[string][]Receipt{},
		answers:     map[[2]string]string{},
		answered:    map[string]int{},
		operator:    map[string][]Arrival{},
		invocations: map[string]InvocationInfo{},
		foreign:     map[string]bool{},
	}
}

// Answer is one outcome the processor logged for a record: what it
// answered that record of invocation RequestID.
type Answer struct {
	RequestID string
	MessageID string
	Outcome   string
}

// Outcome records one outcome line of the processor as the answer to its
// record. The last line of a record wins: a failure that could not release
// its lock logs twice, with the same outcome. A line logged after its
// invocation ended (abandoned at its timeout, the handler still running)
// answers nothing: Lambda would have stopped that process, and SQS sees no
// answer from it.
func (t *Tracker) Outcome(a Answer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ended := t.invocations[a.RequestID]; ended || a.MessageID == "" {
		return
	}
	k := [2]string{a.RequestID, a.MessageID}
	if prev, ok := t.answers[k]; ok {
		t.answered[prev]--
	}
	t.answers[k] = a.Outcome
	t.answered[a.Outcome]++
}

// InProgressHidden adds n records the processor hid until the lock that
// refused them could be taken over (its metric InProgressHidden).
func (t *Tracker) InProgressHidden(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.hidden += n
}

// Receipt is one delivery of a main-queue message to the processor: its
// receive number, the invocation, what the processor answered before the
// invocation ended and whether the event source mapping deleted it.
type Receipt struct {
	Receive   int    `json:"receive"`
	RequestID string `json:"requestId"`
	// Outcome is the processor's logged answer ("" if it logged none: its
	// invocation was abandoned, or failed as a whole, before it got that
	// far).
	Outcome   string `json:"outcome"`
	Deleted   bool   `json:"deleted"`
	Abandoned bool   `json:"abandoned,omitempty"`
}

// MainInvocation records a processor invocation: when it started, whether it
// was abandoned at its timeout, and which sends it had deleted (processed,
// suppressed or forwarded).
func (t *Tracker) MainInvocation(inv localesm.Invocation) {
	deleted := map[string]bool{}
	for _, id := range inv.Deleted {
		deleted[id] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.deliveries += len(inv.Records)
	abandoned := errors.Is(inv.Err, localesm.ErrTimeout)
	t.invocations[inv.RequestID] = InvocationInfo{Started: inv.Started, Abandoned: abandoned, Duration: inv.Duration}
	if abandoned {
		t.timedOut++
	}
	for _, r := range inv.Records {
		n, _ := strconv.Atoi(r.Attributes["ApproximateReceiveCount"])
		k := [2]string{inv.RequestID, r.MessageId}
		t.receipts[r.MessageId] = append(t.receipts[r.MessageId], Receipt{
			Receive: n, RequestID: inv.RequestID, Outcome: t.answers[k], Deleted: deleted[r.MessageId], Abandoned: abandoned,
		})
		if !deleted[r.MessageId] {
			continue
		}
		if b, err := ParseBody(r.Body); err == nil {
			t.acked[b.Send] = true
		}
	}
}

// DeadLetterInvocation records a replayer invocation: every message it
// received went through the dead-letter queue. A redrive keeps the message
// id, so the id is the one the message had in the main queue.
func (t *Tracker) DeadLetterInvocation(inv localesm.Invocation) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range inv.Records {
		send := ""
		if b, err := ParseBody(r.Body); err == nil {
			send = b.Send
		}
		t.deadLetter[r.MessageId] = send
	}
}

// Replayed records a replay the main queue accepted.
func (t *Tracker) Replayed(r Replay) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.replays = append(t.replays, r)
}

// Completed records a completion write of the processor.
func (t *Tracker) Completed(c Completion) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.completions = append(t.completions, c)
}

// AtOperator records a message received from the operator queue. The same
// SQS message received again (its delete failed) is one arrival; the same
// send arriving as another message is a second one, which the report fails.
func (t *Tracker) AtOperator(a Arrival) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if slices.ContainsFunc(t.operator[a.Send], func(o Arrival) bool { return o.MessageID == a.MessageID }) {
		return
	}
	t.operator[a.Send] = append(t.operator[a.Send], a)
}

// Foreign records a message of the operator queue that is not part of this
// run (with -stack the queue is shared with real traffic).
func (t *Tracker) Foreign(messageID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.foreign[messageID] = true
}

// Observed is a snapshot of a Tracker.
type Observed struct {
	Acked        map[string]bool
	Deliveries   int
	DeadLettered int
	// DeadLetters are the messages that went through the dead-letter
	// queue, by send: their message ids, sorted.
	DeadLetters map[string][]string
	// Receipts are the main-queue messages' deliveries to the processor,
	// by message id, in order, each with the processor's answer: one per
	// delivery, so they add up to Deliveries.
	Receipts map[string][]Receipt
	// InProgressHidden is the processor's metric of that name, summed.
	InProgressHidden int
	Replays          []Replay
	// Operator holds every arrival at the operator queue, by send.
	Operator map[string][]Arrival
	// Invocations are the processor's, by request id.
	Invocations map[string]InvocationInfo
	Completions []Completion
	// Foreign is the number of other messages seen at the operator queue.
	Foreign int
	// FaultedCompletions are the keys whose COMPLETED write had a fault
	// injected by -chaos; FaultedInvocations the processor's invocations
	// (by request id) with a fault injected into any of their calls;
	// Chaos what -chaos injected in all.
	FaultedCompletions map[string]bool
	FaultedInvocations map[string]bool
	Chaos              *ChaosStats
	// Left is what the queues still hold at the end, by queue role.
	Left map[string]int
	// Unsent are the sends the producer never sent (by send id): the run
	// gave up first.
	Unsent map[string]bool
	// Elapsed is how long the run took.
	Elapsed time.Duration
}

// Snapshot copies the current observations.
func (t *Tracker) Snapshot() Observed {
	t.mu.Lock()
	defer t.mu.Unlock()
	o := Observed{
		Acked:            maps.Clone(t.acked),
		Deliveries:       t.deliveries,
		DeadLettered:     len(t.deadLetter),
		Replays:          slices.Clone(t.replays),
		Operator:         make(map[string][]Arrival, len(t.operator)),
		Invocations:      maps.Clone(t.invocations),
		Completions:      slices.Clone(t.completions),
		Foreign:          len(t.foreign),
		DeadLetters:      map[string][]string{},
		Receipts:         make(map[string][]Receipt, len(t.receipts)),
		InProgressHidden: t.hidden,
	}
	for k, v := range t.operator {
		o.Operator[k] = slices.Clone(v)
	}
	for id, send := range t.deadLetter {
		if send != "" {
			o.DeadLetters[send] = append(o.DeadLetters[send], id)
		}
	}
	for _, ids := range o.DeadLetters {
		slices.Sort(ids)
	}
	for id, rs := range t.receipts {
		o.Receipts[id] = slices.Clone(rs)
	}
	return o
}

// Resolved counts the sends that reached an end: deleted by the processor or
// received at the operator queue.
func (t *Tracker) Resolved(sends []Send) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.resolved(sends)
}

func (t *Tracker) resolved(sends []Send) int {
	n := 0
	for _, s := range sends {
		if t.acked[s.ID] || len(t.operator[s.ID]) > 0 {
			n++
		}
	}
	return n
}

// Progress is what the progress line shows. While the run goes on, every
// number is counted where it happens: Processed and Suppressed as records
// the processor answered "processed" and "duplicate" (or, with a target,
// Processed as the keys the target accepted), TimedOut as invocations
// abandoned at their timeout. The last line is Summary.Progress: the same
// counts, from the report.
type Progress struct {
	Resolved, Sent, Processed, Suppressed, DeadLettered, Replays, Operator, TimedOut int
	Elapsed                                                                          time.Duration
	// Forwarding: Processed counts what a target accepted, not side effects.
	Forwarding bool
	// Outside: a deployed stack seen from outside (-stack): Processed counts
	// keys COMPLETED in its table; Suppressed, DeadLettered, Replays and
	// TimedOut are not seen.
	Outside bool
}

// Progress computes the progress line's counters.
func (t *Tracker) Progress(w Workload, elapsed time.Duration) Progress {
	t.mu.Lock()
	defer t.mu.Unlock()
	atOperator := 0
	for _, as := range t.operator {
		atOperator += len(as)
	}
	return Progress{
		Resolved:     t.resolved(w.Sends),
		Sent:         len(w.Sends),
		Processed:    t.answered[outcomeProcessed] + t.answered[outcomeUnrecorded],
		Suppressed:   t.answered[outcomeDuplicate],
		DeadLettered: len(t.deadLetter),
		Replays:      len(t.replays),
		Operator:     atOperator,
		TimedOut:     t.timedOut,
		Elapsed:      elapsed,
	}
}
