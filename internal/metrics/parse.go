package metrics

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"time"
)

// Document is an EMF document as CloudWatch reads it.
type Document struct {
	// Timestamp is _aws.Timestamp, to the millisecond.
	Timestamp time.Time
	// Directives are the _aws.CloudWatchMetrics entries.
	Directives []Directive
	// Dimensions holds the value of every member a dimension set names.
	Dimensions map[string]string
	// Values holds the values of every member a metric definition names; a
	// single number is a list of one.
	Values map[string][]float64
}

// Directive is a MetricDirective: the metrics to extract, and under which
// dimension sets.
type Directive struct {
	Namespace     string
	DimensionSets [][]string
	Metrics       []Definition
}

// Definition is a MetricDefinition.
type Definition struct {
	Name string
	Unit Unit // "" when absent: CloudWatch then records None
}

// units are the values the specification allows for a MetricDefinition's
// Unit.
var units = map[Unit]bool{}

func init() {
	for _, u := range []Unit{"Seconds", "Microseconds", "Milliseconds", "Bytes", "Kilobytes", "Megabytes", "Gigabytes",
		"Terabytes", "Bits", "Kilobits", "Megabits", "Gigabits", "Terabits", "Percent", "Count", "Bytes/Second",
		"Kilobytes/Second", "Megabytes/Second", "Gigabytes/Second", "Terabytes/Second", "Bits/Second",
		"Kilobits/Second", "Megabits/Second", "Gigabits/Second", "Terabits/Second", "Count/Second", "None"} {
		units[u] = true
	}
}

// Limits of the specification.
const (
	maxDimensionsPerSet = 30
	maxMetricsPerDoc    = 100
	maxNameLength       = 1024
)

// Parse reads one log line as CloudWatch Logs does and checks it against the
// specification: a JSON object and nothing else; an _aws object with a
// Timestamp in epoch milliseconds and a CloudWatchMetrics array of
// directives; each directive with a Namespace, a Dimensions array of
// dimension sets naming at most 30 members whose values are strings, and a
// Metrics array of at most 100 definitions, each with a Name whose member is
// a number or an array of at most 100 numbers, a valid Unit if any, and a
// StorageResolution of 1 or 60 if any; no member the specification does not
// define in the objects it defines. The error says which rule is broken.
func Parse(line []byte) (Document, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var root map[string]any
	if err := dec.Decode(&root); err != nil {
		return Document{}, fmt.Errorf("emf: not a JSON object: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Document{}, errors.New("emf: data after the JSON object")
	}
	if root == nil {
		return Document{}, errors.New("emf: not a JSON object")
	}
	meta, ok := root["_aws"].(map[string]any)
	if !ok {
		return Document{}, errors.New("emf: no _aws object")
	}
	if err := onlyMembers(meta, "_aws", "Timestamp", "CloudWatchMetrics"); err != nil {
		return Document{}, err
	}
	ts, ok := meta["Timestamp"].(json.Number)
	ms, err := ts.Int64()
	if !ok || err != nil || ms < 0 {
		return Document{}, fmt.Errorf("emf: _aws.Timestamp %v is not a number of epoch milliseconds", meta["Timestamp"])
	}
	list, ok := meta["CloudWatchMetrics"].([]any)
	if !ok {
		return Document{}, errors.New("emf: _aws.CloudWatchMetrics is not an array")
	}
	doc := Document{Timestamp: time.UnixMilli(ms), Dimensions: map[string]string{}, Values: map[string][]float64{}}
	for i, raw := range list {
		d, err := parseDirective(raw, root, &doc)
		if err != nil {
			return Document{}, fmt.Errorf("emf: CloudWatchMetrics[%d]: %w", i, err)
		}
		doc.Directives = append(doc.Directives, d)
	}
	return doc, nil
}

func parseDirective(raw any, root map[string]any, doc *Document) (Directive, error) {
	obj, ok := raw.(map[string]any)
	if !ok {
		return Directive{}, errors.New("not an object")
	}
	if err := onlyMembers(obj, "directive", "Namespace", "Dimensions", "Metrics"); err != nil {
		return Directive{}, err
	}
	var d Directive
	d.Namespace, ok = obj["Namespace"].(string)
	if !ok || d.Namespace == "" || len(d.Namespace) > maxNameLength {
		return Directive{}, fmt.Errorf("Namespace %v is not a string of 1 to %d characters", obj["Namespace"], maxNameLength)
	}
	sets, ok := obj["Dimensions"].([]any)
	if !ok {
		return Directive{}, errors.New("Dimensions is not an array")
	}
	for _, s := range sets {
		names, ok := s.([]any)
		if !ok || len(names) > maxDimensionsPerSet {
			return Directive{}, fmt.Errorf("dimension set %v is not an array of at most %d names", s, maxDimensionsPerSet)
		}
		var set []string
		for _, n := range names {
			name, ok := n.(string)
			if !ok {
				return Directive{}, fmt.Errorf("dimension name %v is not a string", n)
			}
			v, ok := root[name].(string)
			if !ok || v == "" || len(v) > maxNameLength {
				return Directive{}, fmt.Errorf("dimension %q: the root member is %v, not a string of 1 to %d characters", name, root[name], maxNameLength)
			}
			doc.Dimensions[name] = v
			set = append(set, name)
		}
		d.DimensionSets = append(d.DimensionSets, set)
	}
	defs, ok := obj["Metrics"].([]any)
	if !ok || len(defs) > maxMetricsPerDoc {
		return Directive{}, fmt.Errorf("Metrics is not an array of at most %d definitions", maxMetricsPerDoc)
	}
	for _, raw := range defs {
		def, err := parseDefinition(raw, root, doc)
		if err != nil {
			return Directive{}, err
		}
		d.Metrics = append(d.Metrics, def)
	}
	return d, nil
}

func parseDefinition(raw any, root map[string]any, doc *Document) (Definition, error) {
	obj, ok := raw.(map[string]any)
	if !ok {
		return Definition{}, fmt.Errorf("metric definition %v is not an object", raw)
	}
	if err := onlyMembers(obj, "metric definition", "Name", "Unit", "StorageResolution"); err != nil {
		return Definition{}, err
	}
	var def Definition
	def.Name, ok = obj["Name"].(string)
	if !ok || def.Name == "" || len(def.Name) > maxNameLength {
		return Definition{}, fmt.Errorf("metric Name %v is not a string of 1 to %d characters", obj["Name"], maxNameLength)
	}
	if u, present := obj["Unit"]; present {
		s, ok := u.(string)
		if !ok || !units[Unit(s)] {
			return Definition{}, fmt.Errorf("metric %q: Unit %v is not a CloudWatch unit", def.Name, u)
		}
		def.Unit = Unit(s)
	}
	if r, present := obj["StorageResolution"]; present {
		if n, ok := r.(json.Number); !ok || (n.String() != "1" && n.String() != "60") {
			return Definition{}, fmt.Errorf("metric %q: StorageResolution %v is not 1 or 60", def.Name, r)
		}
	}
	values, err := numbers(root[def.Name])
	if err != nil {
		return Definition{}, fmt.Errorf("metric %q: %w", def.Name, err)
	}
	doc.Values[def.Name] = values
	return def, nil
}

// numbers reads a metric member: a number, or an array of 1 to MaxValues
// numbers.
func numbers(v any) ([]float64, error) {
	one := func(v any) (float64, bool) {
		n, ok := v.(json.Number)
		if !ok {
			return 0, false
		}
		f, err := n.Float64()
		return f, err == nil && !math.IsInf(f, 0)
	}
	if f, ok := one(v); ok {
		return []float64{f}, nil
	}
	list, ok := v.([]any)
	if !ok || len(list) == 0 || len(list) > MaxValues {
		return nil, fmt.Errorf("the root member is %v, not a number or an array of 1 to %d numbers", v, MaxValues)
	}
	out := make([]float64, len(list))
	for i, x := range list {
		if out[i], ok = one(x); !ok {
			return nil, fmt.Errorf("value %v is not a number", x)
		}
	}
	return out, nil
}

// onlyMembers refuses a member the specification does not define.
func onlyMembers(obj map[string]any, what string, allowed ...string) error {
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if !slices.Contains(allowed, k) {
			return fmt.Errorf("emf: %s has a member %q the specification does not define", what, k)
		}
	}
	return nil
}

// ParseAll parses every non-empty line of out (what a Set wrote).
func ParseAll(out []byte) ([]Document, error) {
	var docs []Document
	for i, line := range bytes.Split(out, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		d, err := Parse(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		docs = append(docs, d)
	}
	return docs, nil
}

// Values is every value CloudWatch would record for the metric name of the
// namespace sqs-once under exactly the dimensions dims (the dimension set
// of their names, with their values), across docs.
func Values(docs []Document, name string, dims ...Dimension) []float64 {
	want := make([]string, len(dims))
	for i, d := range dims {
		want[i] = d.Name
	}
	slices.Sort(want)
	var out []float64
	for _, doc := range docs {
		if !matches(doc, dims) {
			continue
		}
		for _, d := range doc.Directives {
			if d.Namespace != Namespace || !slices.ContainsFunc(d.Metrics, func(m Definition) bool { return m.Name == name }) {
				continue
			}
			for _, set := range d.DimensionSets {
				if slices.Equal(slices.Sorted(slices.Values(set)), want) {
					out = append(out, doc.Values[name]...)
				}
			}
		}
	}
	return out
}

// Sum is the sum of Values: CloudWatch's Sum statistic over docs.
func Sum(docs []Document, name string, dims ...Dimension) float64 {
	var s float64
	for _, v := range Values(docs, name, dims...) {
		s += v
	}
	return s
}

// UnitOf is the unit docs give the metric name ("" if no document names it,
// or they disagree: CloudWatch would then keep two metrics).
func UnitOf(docs []Document, name string) Unit {
	var unit Unit
	for _, doc := range docs {
		for _, d := range doc.Directives {
			for _, m := range d.Metrics {
				if m.Name != name {
					continue
				}
				if unit != "" && unit != m.Unit {
					return ""
				}
				unit = m.Unit
			}
		}
	}
	return unit
}

func matches(doc Document, dims []Dimension) bool {
	for _, d := range dims {
		if doc.Dimensions[d.Name] != d.Value {
			return false
		}
	}
	return true
}
