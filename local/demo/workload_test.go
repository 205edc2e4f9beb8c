package demo

import (
	"reflect"
	"strings"
	"testing"
)

func spec1000() WorkloadSpec {
	return WorkloadSpec{Keys: 1000, DuplicateShare: 0.2, Poison: 3, Transient: 4, Permanent: 2, Crash: 2, MaxReceiveCount: 5}
}

func TestWorkloadIsDeterministicPerSeed(t *testing.T) {
	t.Parallel()
	a, _ := NewWorkload(spec1000(), 7, "run")
	b, _ := NewWorkload(spec1000(), 7, "run")
	c, _ := NewWorkload(spec1000(), 8, "run")
	if !reflect.DeepEqual(a, b) {
		t.Error("same seed, different workloads")
	}
	if reflect.DeepEqual(a.Sends, c.Sends) {
		t.Error("different seeds, same sends")
	}
}

func TestWorkloadContents(t *testing.T) {
	t.Parallel()
	w, err := NewWorkload(spec1000(), 1, "run")
	if err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	if st.Keys != 1000 || st.Poison != 3 || st.Transient != 4 || st.Permanent != 2 || st.Crash != 2 {
		t.Errorf("stats %+v", st)
	}
	// 20% of the 991 normal keys, each with one or two extra copies.
	if st.DuplicateKeys != 198 || st.ExtraCopies < 198 || st.ExtraCopies > 2*198 {
		t.Errorf("%d duplicated keys with %d extra copies, want 198 keys and 198..396 copies", st.DuplicateKeys, st.ExtraCopies)
	}
	if st.Concurrent == 0 || st.Late == 0 || st.Messages != 1000+st.ExtraCopies {
		t.Errorf("stats %+v: want both concurrent and late copies, one message per send", st)
	}

	keys := w.KeyIndex()
	seen := map[string]bool{}
	firstPos := map[string]int{}
	wave1Started := false
	for i, s := range w.Sends {
		if seen[s.ID] {
			t.Fatalf("send id %s twice", s.ID)
		}
		seen[s.ID] = true
		k, ok := keys[s.Key]
		if !ok {
			t.Fatalf("send %s for unknown key %s", s.ID, s.Key)
		}
		if s.Copy > 1 && (k.Kind != Normal || k.Crash) {
			t.Errorf("key %s (%s, crash %v) is re-sent; only plain normal keys are", k.ID, k.Kind, k.Crash)
		}
		if s.Wave == 1 {
			wave1Started = true
			if s.Copy == 1 {
				t.Errorf("first copy %s in the late wave", s.ID)
			}
		} else if wave1Started {
			t.Errorf("wave 0 send %s after the late wave started", s.ID)
		}
		if s.Copy == 1 {
			firstPos[s.Key] = i
		}
		if s.Concurrent {
			// Within the next two batches of 10: sent by another sender at
			// the same moment.
			if d := i - firstPos[s.Key]; d <= 0 || d > 20 {
				t.Errorf("concurrent copy %s is %d sends after its first copy", s.ID, d)
			}
		}
	}
	for _, k := range w.Keys {
		if k.Kind == Transient && k.Failures != 2 && k.Failures != 5 {
			t.Errorf("transient key %s fails %d times, want 2 or maxReceiveCount", k.ID, k.Failures)
		}
	}
}

func TestBodyRoundTrip(t *testing.T) {
	t.Parallel()
	w, _ := NewWorkload(WorkloadSpec{Keys: 3, MaxReceiveCount: 1}, 1, "r1")
	s := w.Sends[0]
	b, err := ParseBody(w.Body(s, Normal, false))
	if err != nil || b.OrderID != s.Key || b.Send != s.ID || b.Run != "r1" {
		t.Errorf("body %+v, %v", b, err)
	}
	keyless := w.Body(s, Poison, true)
	if strings.Contains(keyless, "orderId") {
		t.Errorf("keyless body %s has an orderId", keyless)
	}
	for _, bad := range []string{"", "{}", "not json", `{"send":"x"}`} {
		if _, err := ParseBody(bad); err == nil {
			t.Errorf("ParseBody(%q) accepted", bad)
		}
	}
}

func TestWorkloadSpecValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		mod  func(*WorkloadSpec)
		want string
	}{
		{"no keys", func(s *WorkloadSpec) { s.Keys = 0 }, "-n 0"},
		{"too many special", func(s *WorkloadSpec) { s.Keys = 5 }, "more than -n 5"},
		{"share above 1", func(s *WorkloadSpec) { s.DuplicateShare = 1.5 }, "-dup"},
		{"negative poison", func(s *WorkloadSpec) { s.Poison = -1 }, "negative"},
		{"too many crashes", func(s *WorkloadSpec) { s.Keys = 10; s.Crash = 2 }, "-crash 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := spec1000()
			tt.mod(&s)
			if err := s.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate() = %v, want it to mention %q", err, tt.want)
			}
		})
	}
	if err := spec1000().Validate(); err != nil {
		t.Errorf("default spec: %v", err)
	}
}
