// Package metricstest checks what a handler wrote as metrics the way
// CloudWatch would read it, for the tests of the packages that emit them.
package metricstest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/internal/metrics"
)

// Spec is what a handler promises of its EMF output.
type Spec struct {
	// Function is the FunctionName dimension of every document.
	Function string
	// From and To bound the documents' timestamps: the handler's clock
	// over the invocations.
	From, To time.Time
	// Invocations is how many Handle calls wrote: each writes exactly one
	// document with the FunctionName dimension alone.
	Invocations int
	// Units are the metrics the handler may write, with their units.
	Units map[string]metrics.Unit
	// Base are the metrics every invocation writes, zeros included.
	Base []string
	// Extra are the dimensions a document may add to FunctionName.
	Extra []string
}

// Check parses out (the lines the handlers wrote) and checks every
// document field by field: the specification's required fields and types
// (metrics.Parse), one line per document, then spec's promises: the
// timestamp, namespace sqs-once, the FunctionName dimension in every
// dimension set, alone or with one Extra dimension (and then both sets, so
// the function's total is kept), the units, whole non-negative counts, and
// one document per invocation without an extra dimension, holding Base.
func Check(t *testing.T, out string, spec Spec) []metrics.Document {
	t.Helper()
	docs, err := metrics.ParseAll([]byte(out))
	if err != nil {
		t.Fatalf("not what CloudWatch extracts: %v\n%s", err, out)
	}
	if n := strings.Count(out, "\n"); n != len(docs) {
		t.Errorf("%d lines for %d documents: a document must be one line", n, len(docs))
	}
	base := 0
	for i, d := range docs {
		if d.Timestamp.Before(spec.From.Truncate(time.Millisecond)) || d.Timestamp.After(spec.To) {
			t.Errorf("document %d: Timestamp %v, not the handler's clock (%v to %v)", i, d.Timestamp, spec.From, spec.To)
		}
		if len(d.Directives) != 1 {
			t.Fatalf("document %d: %d directives, want 1", i, len(d.Directives))
		}
		dir := d.Directives[0]
		if dir.Namespace != "sqs-once" {
			t.Errorf("document %d: Namespace %q", i, dir.Namespace)
		}
		if d.Dimensions["FunctionName"] != spec.Function {
			t.Errorf("document %d: FunctionName %q, want %q", i, d.Dimensions["FunctionName"], spec.Function)
		}
		switch sets := dir.DimensionSets; {
		case slices.EqualFunc(sets, [][]string{{"FunctionName"}}, slices.Equal):
			base++
			for _, want := range spec.Base {
				if !slices.ContainsFunc(dir.Metrics, func(m metrics.Definition) bool { return m.Name == want }) {
					t.Errorf("document %d lacks %s: every invocation writes it, zero or not", i, want)
				}
			}
		case len(sets) == 2 && slices.Equal(sets[0], []string{"FunctionName"}) && len(sets[1]) == 2 &&
			sets[1][0] == "FunctionName" && slices.Contains(spec.Extra, sets[1][1]):
			if d.Dimensions[sets[1][1]] == "" {
				t.Errorf("document %d: no %s value", i, sets[1][1])
			}
		default:
			t.Errorf("document %d: dimension sets %v", i, sets)
		}
		for _, m := range dir.Metrics {
			unit, ok := spec.Units[m.Name]
			if !ok || m.Unit != unit {
				t.Errorf("document %d: metric %s in %q, want one of %v", i, m.Name, m.Unit, spec.Units)
			}
			for _, v := range d.Values[m.Name] {
				if v < 0 || (unit == metrics.Count && v != float64(int64(v))) {
					t.Errorf("document %d: %s = %v", i, m.Name, d.Values[m.Name])
				}
			}
			if unit == metrics.Count && len(d.Values[m.Name]) != 1 {
				t.Errorf("document %d: %s = %v, want one count", i, m.Name, d.Values[m.Name])
			}
		}
	}
	if base != spec.Invocations {
		t.Errorf("%d documents with FunctionName alone, want one per invocation (%d)", base, spec.Invocations)
	}
	return docs
}

// Sums are what CloudWatch's Sum statistic would show over some documents:
// "Metric" per function, and "Metric/value" per function and extra
// dimension value, for every metric and value the documents hold.
func Sums(docs []metrics.Document, function string) map[string]float64 {
	fn := metrics.Dimension{Name: "FunctionName", Value: function}
	got := map[string]float64{}
	for _, d := range docs {
		dir := d.Directives[0]
		for _, m := range dir.Metrics {
			got[m.Name] = metrics.Sum(docs, m.Name, fn)
			if len(dir.DimensionSets) == 2 {
				extra := metrics.Dimension{Name: dir.DimensionSets[1][1], Value: d.Dimensions[dir.DimensionSets[1][1]]}
				got[m.Name+"/"+extra.Value] = metrics.Sum(docs, m.Name, fn, extra)
			}
		}
	}
	return got
}

// CheckSums compares Sums with want; a metric want does not name must be
// 0 or absent.
func CheckSums(t *testing.T, docs []metrics.Document, function string, want map[string]float64) {
	t.Helper()
	got := Sums(docs, function)
	for _, k := range slices.Sorted(keys(got, want)) {
		if got[k] != want[k] {
			t.Errorf("%s = %v, want %v", k, got[k], want[k])
		}
	}
}

func keys(ms ...map[string]float64) func(func(string) bool) {
	return func(yield func(string) bool) {
		seen := map[string]bool{}
		for _, m := range ms {
			for k := range m {
				if !seen[k] {
					seen[k] = true
					if !yield(k) {
						return
					}
				}
			}
		}
	}
}

// Lines are the lines of a function's output that are EMF documents (JSON
// objects with an _aws member); the rest are its log lines.
func Lines(output string) string {
	var b strings.Builder
	for line := range strings.Lines(output) {
		var probe map[string]json.RawMessage
		if json.Unmarshal([]byte(line), &probe) == nil && probe["_aws"] != nil {
			b.WriteString(line)
		}
	}
	return b.String()
}
