package demo

import (
	"errors"
	"sync"
	"time"

	"github.com/sqs-once/sqs-once/internal/localesm"
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
	Reason      string `json:"reason"`
	ReplayCount string `json:"replayCount,omitempty"`
}

// Tracker collects what the pipeline did, from the event source mappings'
// invocations and the replayer's send calls. It is safe for concurrent use.
type Tracker struct {
	mu         sync.Mutex
	acked      map[string]bool
	deliveries int
	deadLetter map[string]bool
	replays    []Replay
	operator   map[string]Arrival
	abandoned  map[string]bool
	foreign    int
}

// NewTracker returns an empty Tracker.
func NewTracker() *Tracker {
	return &Tracker{
		acked:      map[string]bool{},
		deadLetter: map[string]bool{},
		operator:   map[string]Arrival{},
		abandoned:  map[string]bool{},
	}
}

// MainInvocation records a processor invocation: which sends the processor
// had deleted (processed, suppressed or forwarded) and whether it was
// abandoned at its timeout.
func (t *Tracker) MainInvocation(inv localesm.Invocation) {
	deleted := map[string]bool{}
	for _, id := range inv.Deleted {
		deleted[id] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.deliveries += len(inv.Records)
	for _, r := range inv.Records {
		if !deleted[r.MessageId] {
			continue
		}
		if b, err := ParseBody(r.Body); err == nil {
			t.acked[b.Send] = true
		}
	}
	t.noteAbandoned(inv)
}

// DeadLetterInvocation records a replayer invocation.
func (t *Tracker) DeadLetterInvocation(inv localesm.Invocation) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range inv.Records {
		t.deadLetter[r.MessageId] = true
	}
	t.noteAbandoned(inv)
}

func (t *Tracker) noteAbandoned(inv localesm.Invocation) {
	if errors.Is(inv.Err, localesm.ErrTimeout) {
		t.abandoned[inv.RequestID] = true
	}
}

// Replayed records a replay the main queue accepted.
func (t *Tracker) Replayed(r Replay) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.replays = append(t.replays, r)
}

// AtOperator records a message received from the operator queue.
func (t *Tracker) AtOperator(a Arrival) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.operator[a.Send] = a
}

// Foreign counts a message that is not part of this run (--stack mode shares
// queues with real traffic).
func (t *Tracker) Foreign() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.foreign++
}

// Observed is a snapshot of a Tracker.
type Observed struct {
	Acked        map[string]bool
	Deliveries   int
	DeadLettered int
	Replays      []Replay
	Operator     map[string]Arrival
	Abandoned    map[string]bool
	Foreign      int
	// Left is what the queues still hold at the end, by queue role.
	Left map[string]int
	// Elapsed is how long the run took.
	Elapsed time.Duration
}

// Snapshot copies the current observations.
func (t *Tracker) Snapshot() Observed {
	t.mu.Lock()
	defer t.mu.Unlock()
	o := Observed{
		Acked:        make(map[string]bool, len(t.acked)),
		Deliveries:   t.deliveries,
		DeadLettered: len(t.deadLetter),
		Replays:      append([]Replay(nil), t.replays...),
		Operator:     make(map[string]Arrival, len(t.operator)),
		Abandoned:    make(map[string]bool, len(t.abandoned)),
		Foreign:      t.foreign,
	}
	for k, v := range t.acked {
		o.Acked[k] = v
	}
	for k, v := range t.operator {
		o.Operator[k] = v
	}
	for k, v := range t.abandoned {
		o.Abandoned[k] = v
	}
	return o
}

// Resolved counts the sends that reached an end: deleted by the processor or
// received at the operator queue.
func (t *Tracker) Resolved(w Workload) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, s := range w.Sends {
		if t.acked[s.ID] || t.operator[s.ID].Send != "" {
			n++
		}
	}
	return n
}

// Progress is what the live progress line shows.
type Progress struct {
	Resolved, Sent, Processed, Suppressed, DeadLettered, Replays, Operator int
	Elapsed                                                                time.Duration
}

// Progress computes the progress line's counters; processed is the number of
// side effects in the ledger so far.
func (t *Tracker) Progress(w Workload, processed int, elapsed time.Duration) Progress {
	resolved := t.Resolved(w)
	t.mu.Lock()
	defer t.mu.Unlock()
	ackedOnly := 0
	for s := range t.acked {
		if t.operator[s].Send == "" {
			ackedOnly++
		}
	}
	return Progress{
		Resolved:     resolved,
		Sent:         len(w.Sends),
		Processed:    processed,
		Suppressed:   max(0, ackedOnly-processed),
		DeadLettered: len(t.deadLetter),
		Replays:      len(t.replays),
		Operator:     len(t.operator),
		Elapsed:      elapsed,
	}
}
