package suggest

import "testing"

// templateParameters are some of template.yaml's parameter names, close
// to one another as real ones are.
var templateParameters = []string{"ProcessorTimeout", "ProcessorMemory", "ProcessorBatchingWindow", "ProcessorMappingEnabled", "Target", "ExistingQueueArn", "MaxMessageAge", "MaxReceiveCount"}

func TestClosest(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, want string
	}{
		{"ProcesorTimeout", "ProcessorTimeout"},   // a letter dropped
		{"ProcessorTiemout", "ProcessorTimeout"},  // two swapped: two edits
		{"processortimeout", "ProcessorTimeout"},  // case only
		{"ProcessorTimeoutt", "ProcessorTimeout"}, // a letter doubled
		{"Taget", "Target"},
		{"ExistingQueueARN", "ExistingQueueArn"},
		{"MaxMesageAge", "MaxMessageAge"},
		{"permanent-eror", ""},   // known to another list only
		{"ProcessorTimeout", ""}, // known: nothing to suggest
		{"Timeout", ""},          // far from every name
		{"ProcessorTmt", ""},     // four edits
		{"zzz", ""},
		{"", ""},
		{"Tx", ""}, // two edits from nothing short enough to be meant
	} {
		got, ok := Closest(tt.name, templateParameters)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("Closest(%q) = %q, %v; want %q", tt.name, got, ok, tt.want)
		}
	}
	// A tie goes to the first in sorted order, whatever the list's order.
	for _, known := range [][]string{{"ab-c", "ab-d"}, {"ab-d", "ab-c"}} {
		if got, _ := Closest("ab-x", known); got != "ab-c" {
			t.Errorf("Closest(ab-x, %v) = %q, want ab-c", known, got)
		}
	}
	// A third of the known name's length: one edit to a three-letter
	// name, not two.
	if got, ok := Closest("fox", []string{"foo"}); !ok || got != "foo" {
		t.Errorf("Closest(fox, foo) = %q, %v", got, ok)
	}
	if got, ok := Closest("fxx", []string{"foo"}); ok {
		t.Errorf("Closest(fxx, foo) = %q: two edits of three letters", got)
	}
}

func TestDistance(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"kitten", "sitting", 3},
		{"ProcesorTimeout", "ProcessorTimeout", 1}, {"héllo", "hello", 1}, {"abc", "abc", 0},
	} {
		if got := Distance(tt.a, tt.b); got != tt.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := Distance(tt.b, tt.a); got != tt.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tt.b, tt.a, got, tt.want)
		}
	}
}
