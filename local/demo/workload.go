package demo

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
)

// Kind is how the demo's business handler treats a key.
type Kind string

const (
	// Normal keys succeed on their first attempt.
	Normal Kind = "normal"
	// Poison keys always fail: they go through the DLQ, every replay, and
	// end at the operator queue.
	Poison Kind = "poison"
	// Transient keys fail a few times, then succeed.
	Transient Kind = "transient"
	// Permanent keys are rejected with sqsonce.Permanent: straight to the
	// operator queue, no retries burnt.
	Permanent Kind = "permanent"
)

// Key is one business key (an order) of the workload.
type Key struct {
	ID   string `json:"id"`
	Kind Kind   `json:"kind"`
	// Failures is how many attempts of a Transient key fail before one
	// succeeds.
	Failures int `json:"failures,omitempty"`
	// Crash marks a key whose first side effect is followed by a simulated
	// crash of its invocation (--crash).
	Crash bool `json:"crash,omitempty"`
}

// Send is one message the producer sends: a key's first copy or a re-send
// with a new messageId, as a retrying producer does.
type Send struct {
	ID  string `json:"id"`
	Key string `json:"key"`
	// Copy is 1 for the first send of the key, 2 and 3 for re-sends.
	Copy int `json:"copy"`
	// Wave 0 is sent at once; wave 1 later, when most keys are done, as a
	// producer whose acknowledgement timed out retries.
	Wave int `json:"wave"`
	// Concurrent marks a re-send sent together with the first copy, so two
	// pollers race for the key.
	Concurrent bool `json:"concurrent,omitempty"`
}

// Workload is everything the producer will send, in sending order per wave.
type Workload struct {
	RunID string
	Keys  []Key
	Sends []Send
}

// WorkloadSpec sizes a workload.
type WorkloadSpec struct {
	Keys           int
	DuplicateShare float64 // share of normal keys sent two or three times
	Poison         int
	Transient      int
	Permanent      int
	Crash          int
	// MaxReceiveCount is the main queue's; half the transient keys fail that
	// many times, so they go through the DLQ and succeed on a replay.
	MaxReceiveCount int
}

// Validate explains a spec that cannot be generated.
func (s WorkloadSpec) Validate() error {
	special := s.Poison + s.Transient + s.Permanent
	switch {
	case s.Keys < 1:
		return fmt.Errorf("-n %d: need at least one key", s.Keys)
	case s.Poison < 0 || s.Transient < 0 || s.Permanent < 0 || s.Crash < 0:
		return fmt.Errorf("-poison, -transient, -permanent and -crash must not be negative")
	case special > s.Keys:
		return fmt.Errorf("-poison %d + -transient %d + -permanent %d is more than -n %d keys", s.Poison, s.Transient, s.Permanent, s.Keys)
	case !(s.DuplicateShare >= 0 && s.DuplicateShare <= 1):
		return fmt.Errorf("-dup %v: must be a share between 0 and 1", s.DuplicateShare)
	case s.Crash > s.Keys-special:
		return fmt.Errorf("-crash %d: only %d normal keys can crash", s.Crash, s.Keys-special)
	case s.MaxReceiveCount < 1:
		return fmt.Errorf("max receive count %d: must be at least 1", s.MaxReceiveCount)
	}
	return nil
}

// NewWorkload draws a workload from seed: the same seed gives the same keys,
// copies and order.
func NewWorkload(spec WorkloadSpec, seed uint64, runID string) (Workload, error) {
	if err := spec.Validate(); err != nil {
		return Workload{}, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x5e550ce))
	w := Workload{RunID: runID, Keys: make([]Key, spec.Keys)}
	for i := range w.Keys {
		w.Keys[i] = Key{ID: fmt.Sprintf("order-%05d", i+1), Kind: Normal}
	}
	// Special kinds go to randomly chosen keys, so they are spread over the
	// sending order.
	order := rng.Perm(spec.Keys)
	next := 0
	assign := func(n int, kind Kind) {
		for range n {
			w.Keys[order[next]].Kind = kind
			next++
		}
	}
	assign(spec.Poison, Poison)
	assign(spec.Transient, Transient)
	assign(spec.Permanent, Permanent)
	transient := 0
	for i := range w.Keys {
		if w.Keys[i].Kind == Transient {
			// Alternate short outages (retried through the visibility
			// timeout) with long ones that outlast maxReceiveCount and are
			// rescued by a replay.
			w.Keys[i].Failures = max(1, min(2, spec.MaxReceiveCount-1))
			if transient%2 == 1 {
				w.Keys[i].Failures = spec.MaxReceiveCount
			}
			transient++
		}
	}

	normal := make([]int, 0, spec.Keys)
	for _, i := range order[next:] {
		normal = append(normal, i)
	}
	// Crashing keys are sent once, so their second side effect can only come
	// from the crash, not from a duplicate.
	crashing := normal[:spec.Crash]
	for _, i := range crashing {
		w.Keys[i].Crash = true
	}
	candidates := normal[spec.Crash:]
	dups := min(len(candidates), int(spec.DuplicateShare*float64(spec.Keys-spec.Poison-spec.Transient-spec.Permanent)+0.5))

	type slotted struct {
		slot float64
		send Send
	}
	var wave0 []slotted
	var wave1 []Send
	copies := make([]int, spec.Keys)
	for i := range w.Keys {
		copies[i] = 1
	}
	for _, i := range candidates[:dups] {
		copies[i] = 2 + rng.IntN(2)
	}
	// Keys that fail go first: their retries, dead-lettering and replays
	// take the longest, and run while the bulk is processed.
	sendOrder := rng.Perm(spec.Keys)
	slices.SortStableFunc(sendOrder, func(a, b int) int {
		return cmpBool(w.Keys[a].Kind == Normal, w.Keys[b].Kind == Normal)
	})
	for pos, i := range sendOrder {
		key := w.Keys[i].ID
		slot := float64(pos)
		wave0 = append(wave0, slotted{slot, Send{ID: sendID(i, 1), Key: key, Copy: 1}})
		for c := 2; c <= copies[i]; c++ {
			s := Send{ID: sendID(i, c), Key: key, Copy: c}
			if c == 2 && rng.IntN(2) == 0 {
				// A batch later: another sender goroutine sends it at the
				// same moment as the first copy.
				s.Concurrent = true
				wave0 = append(wave0, slotted{slot + 10.5, s})
				continue
			}
			s.Wave = 1
			wave1 = append(wave1, s)
		}
	}
	slices.SortStableFunc(wave0, func(a, b slotted) int {
		switch {
		case a.slot < b.slot:
			return -1
		case a.slot > b.slot:
			return 1
		}
		return 0
	})
	for _, s := range wave0 {
		w.Sends = append(w.Sends, s.send)
	}
	rng.Shuffle(len(wave1), func(a, b int) { wave1[a], wave1[b] = wave1[b], wave1[a] })
	w.Sends = append(w.Sends, wave1...)
	return w, nil
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func sendID(key, copy int) string { return fmt.Sprintf("s%05d-%d", key+1, copy) }

// Body is the JSON body of every demo message. The send id survives replays
// and operator forwarding (both keep the body byte for byte), so every
// message can be traced back to the send it came from.
type Body struct {
	OrderID string `json:"orderId,omitempty"`
	Send    string `json:"send"`
	Kind    Kind   `json:"kind"`
	Run     string `json:"run"`
	Amount  int    `json:"amountCents"`
}

// Body returns the message body of s. keyless leaves the orderId out: in
// --stack mode that makes a poison message the deployed processor can never
// key.
func (w Workload) Body(s Send, kind Kind, keyless bool) string {
	b := Body{OrderID: s.Key, Send: s.ID, Kind: kind, Run: w.RunID, Amount: 100 + len(s.Key)*7}
	if keyless {
		b.OrderID = ""
	}
	raw, _ := json.Marshal(b) // a struct of strings and ints always encodes
	return string(raw)
}

// ParseBody decodes a demo message body.
func ParseBody(s string) (Body, error) {
	var b Body
	if err := json.Unmarshal([]byte(s), &b); err != nil {
		return Body{}, fmt.Errorf("not a demo message body: %w", err)
	}
	if b.Send == "" || b.Run == "" {
		return Body{}, fmt.Errorf("not a demo message body: no send or run id")
	}
	return b, nil
}

// KeyIndex maps key ids to their Key.
func (w Workload) KeyIndex() map[string]Key {
	m := make(map[string]Key, len(w.Keys))
	for _, k := range w.Keys {
		m[k.ID] = k
	}
	return m
}

// Stats summarises the workload for the report.
type WorkloadStats struct {
	Keys          int `json:"keys"`
	Messages      int `json:"messages"`
	DuplicateKeys int `json:"duplicateKeys"`
	ExtraCopies   int `json:"extraCopies"`
	Concurrent    int `json:"concurrentCopies"`
	Late          int `json:"lateCopies"`
	Poison        int `json:"poison"`
	Transient     int `json:"transient"`
	Permanent     int `json:"permanent"`
	Crash         int `json:"crash"`
}

// Stats counts what the workload contains.
func (w Workload) Stats() WorkloadStats {
	st := WorkloadStats{Keys: len(w.Keys), Messages: len(w.Sends)}
	for _, k := range w.Keys {
		switch k.Kind {
		case Poison:
			st.Poison++
		case Transient:
			st.Transient++
		case Permanent:
			st.Permanent++
		}
		if k.Crash {
			st.Crash++
		}
	}
	dupKeys := map[string]bool{}
	for _, s := range w.Sends {
		if s.Copy > 1 {
			st.ExtraCopies++
			dupKeys[s.Key] = true
			if s.Concurrent {
				st.Concurrent++
			} else {
				st.Late++
			}
		}
	}
	st.DuplicateKeys = len(dupKeys)
	return st
}
