package metrics

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
	"unicode/utf8"
)

// Namespace is the CloudWatch namespace of every sqs-once metric.
const Namespace = "sqs-once"

// Unit is a metric's CloudWatch unit.
type Unit string

// The units sqs-once uses; Parse accepts every unit CloudWatch knows.
const (
	Count   Unit = "Count"
	Seconds Unit = "Seconds"
)

// MaxValues is the most values one metric may carry in one document (the
// specification's limit); Write spreads more over several documents.
const MaxValues = 100

// Dimension is one dimension of a metric: its name and value.
type Dimension struct{ Name, Value string }

// Set gathers one invocation's metrics under base dimensions (the function),
// and optionally one more dimension each (a reason, an attempt). It is not
// safe for concurrent use: the handlers fill it once their records are
// decided, from one goroutine.
type Set struct {
	base   []Dimension
	groups []*group // in order of first use, so the output is stable
}

// group is the metrics of one extra dimension (none for the base group):
// one document.
type group struct {
	extra   *Dimension
	metrics []*metric
}

type metric struct {
	name   string
	unit   Unit
	count  bool // a single number, summed; otherwise a list of values
	values []float64
	// clash: the name was also used as the other kind, or with another
	// unit; one member cannot hold both, so Documents refuses the set.
	clash bool
}

// NewSet returns an empty Set whose metrics all carry base.
func NewSet(base ...Dimension) *Set {
	return &Set{base: base}
}

// Count adds n to the counter name, carrying the extra dimension if one is
// given. A counter counted once, even with n = 0, is written: a metric that
// says 0 each invocation graphs as 0 rather than as a gap.
func (s *Set) Count(name string, n int, extra ...Dimension) {
	m := s.metric(name, Count, true, extra)
	if len(m.values) == 0 {
		m.values = []float64{0}
	}
	m.values[0] += float64(n)
}

// Observe records one value of the distribution name (a delay drawn, say):
// CloudWatch keeps every value, so its statistics (p50, maximum) are over
// the values, not over invocations.
func (s *Set) Observe(name string, unit Unit, v float64, extra ...Dimension) {
	m := s.metric(name, unit, false, extra)
	m.values = append(m.values, v)
}

func (s *Set) metric(name string, unit Unit, count bool, extra []Dimension) *metric {
	var x *Dimension
	if len(extra) > 0 {
		x = &extra[0]
	}
	var g *group
	for _, c := range s.groups {
		if (c.extra == nil) == (x == nil) && (x == nil || *c.extra == *x) {
			g = c
			break
		}
	}
	if g == nil {
		g = &group{extra: x}
		s.groups = append(s.groups, g)
	}
	for _, m := range g.metrics {
		if m.name == name {
			m.clash = m.clash || m.unit != unit || m.count != count
			return m
		}
	}
	m := &metric{name: name, unit: unit, count: count}
	g.metrics = append(g.metrics, m)
	return m
}

// Empty reports whether nothing was counted or observed.
func (s *Set) Empty() bool { return len(s.groups) == 0 }

// Documents returns the EMF documents of the set at now: one per group,
// more where a metric has over MaxValues values. A group with an extra
// dimension declares two dimension sets, the base alone and the base with
// the extra one, so CloudWatch keeps both the function's total and the
// breakdown. What CloudWatch would not extract as given is an error: an
// empty, clashing or overlong name or value, one that is not UTF-8 (JSON
// would turn it into U+FFFD), a name both counted and observed or with two
// units, an unknown unit, a value that is not finite, over 100 metrics or
// 30 dimensions in a document, a time before 1970.
func (s *Set) Documents(now time.Time) ([][]byte, error) {
	if now.UnixMilli() < 0 {
		return nil, fmt.Errorf("metrics: timestamp %v is before 1970", now)
	}
	var docs [][]byte
	for _, g := range s.groups {
		dims := append([]Dimension(nil), s.base...)
		if g.extra != nil {
			dims = append(dims, *g.extra)
		}
		if err := checkNames(dims, g.metrics); err != nil {
			return nil, err
		}
		names := make([]string, len(s.base))
		for i, d := range s.base {
			names[i] = d.Name
		}
		sets := [][]string{names}
		if g.extra != nil {
			sets = append(sets, append(append([]string(nil), names...), g.extra.Name))
		}
		for part := 0; ; part++ {
			doc, ok, err := document(now, dims, sets, g.metrics, part)
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			docs = append(docs, doc)
		}
	}
	return docs, nil
}

// checkNames refuses what CloudWatch would not extract (what Parse
// refuses): an empty name or dimension value, a dimension value or metric
// name over 1024 bytes, a name or value that is not UTF-8, a name used
// twice in one document (members of one JSON object), a metric both
// counted and observed or with two units, an unknown unit, and more
// dimensions or metrics than one document may declare.
func checkNames(dims []Dimension, metrics []*metric) error {
	if len(dims) > maxDimensionsPerSet || len(metrics) > maxMetricsPerDoc {
		return fmt.Errorf("metrics: %d dimensions and %d metrics in one document, over %d or %d", len(dims), len(metrics), maxDimensionsPerSet, maxMetricsPerDoc)
	}
	seen := map[string]bool{"_aws": true}
	for _, d := range dims {
		if d.Name == "" || d.Value == "" || len(d.Value) > maxNameLength || seen[d.Name] || !utf8.ValidString(d.Name) || !utf8.ValidString(d.Value) {
			return fmt.Errorf("metrics: dimension %q=%q: empty, over 1024 bytes, not UTF-8, or a name used twice", d.Name, d.Value)
		}
		seen[d.Name] = true
	}
	for _, m := range metrics {
		if m.name == "" || len(m.name) > maxNameLength || seen[m.name] || !utf8.ValidString(m.name) {
			return fmt.Errorf("metrics: metric %q: empty, over 1024 bytes, not UTF-8, or a name used twice", m.name)
		}
		if m.clash || !units[m.unit] {
			return fmt.Errorf("metrics: metric %q: both counted and observed, with two units, or with unit %q, not a CloudWatch unit", m.name, m.unit)
		}
		seen[m.name] = true
	}
	return nil
}

// directive and definition are the specification's MetricDirective and
// MetricDefinition objects.
type directive struct {
	Namespace  string       `json:"Namespace"`
	Dimensions [][]string   `json:"Dimensions"`
	Metrics    []definition `json:"Metrics"`
}

type definition struct {
	Name string `json:"Name"`
	Unit Unit   `json:"Unit"`
}

// document is part number part of a group: part 0 carries the counters and
// the first MaxValues values of each distribution, part k the values from
// k*MaxValues on. ok is false when the part would be empty.
func document(now time.Time, dims []Dimension, sets [][]string, metrics []*metric, part int) ([]byte, bool, error) {
	root := map[string]any{}
	var defs []definition
	for _, m := range metrics {
		var v any
		switch {
		case m.count && part == 0:
			v = m.values[0]
		case !m.count && len(m.values) > part*MaxValues:
			v = m.values[part*MaxValues : min(len(m.values), (part+1)*MaxValues)]
		default:
			continue
		}
		root[m.name] = v
		defs = append(defs, definition{Name: m.name, Unit: m.unit})
	}
	if len(defs) == 0 {
		return nil, false, nil
	}
	for _, d := range dims {
		root[d.Name] = d.Value
	}
	root["_aws"] = map[string]any{
		"Timestamp":         now.UnixMilli(),
		"CloudWatchMetrics": []directive{{Namespace: Namespace, Dimensions: sets, Metrics: defs}},
	}
	b, err := json.Marshal(root)
	return b, err == nil, err
}

// Write writes the set's documents to w at now, one line each. Each line is
// one Write call, so log lines written meanwhile by other goroutines do not
// split a document. An empty set writes nothing.
func (s *Set) Write(w io.Writer, now time.Time) error {
	docs, err := s.Documents(now)
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range docs {
		if _, err := w.Write(append(d, '\n')); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
