package metrics_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/internal/metrics"
)

var (
	now = time.Date(2026, 11, 23, 14, 30, 0, 123_000_000, time.UTC)
	fn  = metrics.Dimension{Name: "FunctionName", Value: "orders-processor"}
)

func reason(r string) metrics.Dimension { return metrics.Dimension{Name: "Reason", Value: r} }

// TestWriteIsWhatCloudWatchExtracts writes sets and reads them back as
// CloudWatch would: every line a valid document, and the sums per metric
// and dimension set what was counted.
func TestWriteIsWhatCloudWatchExtracts(t *testing.T) {
	t.Parallel()
	many := make([]float64, 250)
	for i := range many {
		many[i] = float64(i % 7)
	}
	type want struct {
		metric string
		dims   []metrics.Dimension
		sum    float64
		n      int // values CloudWatch records
	}
	tests := []struct {
		name  string
		fill  func(s *metrics.Set)
		docs  int
		wants []want
	}{
		{"nothing counted writes nothing", func(*metrics.Set) {}, 0, nil},
		{"zero counts are written", func(s *metrics.Set) {
			s.Count("Processed", 0)
			s.Count("Duplicate", 0)
		}, 1, []want{{"Processed", []metrics.Dimension{fn}, 0, 1}, {"Duplicate", []metrics.Dimension{fn}, 0, 1}}},
		{"counts add up", func(s *metrics.Set) {
			s.Count("Processed", 2)
			s.Count("Processed", 3)
			s.Count("Duplicate", 1)
		}, 1, []want{{"Processed", []metrics.Dimension{fn}, 5, 1}, {"Duplicate", []metrics.Dimension{fn}, 1, 1}}},
		{"a reason is a document of its own, under both dimension sets", func(s *metrics.Set) {
			s.Count("Processed", 1)
			s.Count("Failed", 2, reason("handler-error"))
			s.Count("Failed", 1, reason("no-key"))
			s.Count("Failed", 1, reason("handler-error"))
		}, 3, []want{
			{"Processed", []metrics.Dimension{fn}, 1, 1},
			{"Failed", []metrics.Dimension{fn}, 4, 2},
			{"Failed", []metrics.Dimension{fn, reason("handler-error")}, 3, 1},
			{"Failed", []metrics.Dimension{fn, reason("no-key")}, 1, 1},
			// Not published without the function.
			{"Failed", []metrics.Dimension{reason("no-key")}, 0, 0},
		}},
		{"values beyond 100 spread over documents", func(s *metrics.Set) {
			for _, v := range many {
				s.Observe("ReplayDelay", metrics.Seconds, v, metrics.Dimension{Name: "Attempt", Value: "1"})
			}
			s.Count("Replayed", 250, metrics.Dimension{Name: "Attempt", Value: "1"})
		}, 3, []want{
			{"ReplayDelay", []metrics.Dimension{fn}, sum(many), 250},
			{"ReplayDelay", []metrics.Dimension{fn, {Name: "Attempt", Value: "1"}}, sum(many), 250},
			{"Replayed", []metrics.Dimension{fn}, 250, 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := metrics.NewSet(fn)
			tt.fill(s)
			var out bytes.Buffer
			if err := s.Write(&out, now); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if out.Len() == 0 {
				lines = nil
			}
			if len(lines) != tt.docs {
				t.Fatalf("%d lines, want %d:\n%s", len(lines), tt.docs, out.String())
			}
			docs, err := metrics.ParseAll(out.Bytes())
			if err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			for _, d := range docs {
				if !d.Timestamp.Equal(now.Truncate(time.Millisecond)) {
					t.Errorf("Timestamp %v, want %v", d.Timestamp, now)
				}
				if len(d.Directives) != 1 || d.Directives[0].Namespace != "sqs-once" {
					t.Errorf("directives %+v, want one in namespace sqs-once", d.Directives)
				}
				for _, m := range d.Directives[0].Metrics {
					if n := len(d.Values[m.Name]); n == 0 || n > metrics.MaxValues {
						t.Errorf("%s has %d values in one document", m.Name, n)
					}
				}
			}
			for _, w := range tt.wants {
				vals := metrics.Values(docs, w.metric, w.dims...)
				if len(vals) != w.n || sum(vals) != w.sum {
					t.Errorf("%s %v: %d values summing to %v, want %d summing to %v", w.metric, w.dims, len(vals), sum(vals), w.n, w.sum)
				}
			}
		})
	}
}

func sum(vs []float64) float64 {
	var s float64
	for _, v := range vs {
		s += v
	}
	return s
}

// TestDocumentShape checks one document member by member against the
// specification's example structure, independently of Parse.
func TestDocumentShape(t *testing.T) {
	t.Parallel()
	s := metrics.NewSet(fn)
	s.Count("Failed", 2, reason("no-key"))
	s.Observe("ReplayDelay", metrics.Seconds, 1.5, reason("no-key"))
	docs, err := s.Documents(now)
	if err != nil || len(docs) != 1 {
		t.Fatalf("%d documents, %v", len(docs), err)
	}
	var got map[string]any
	if err := json.Unmarshal(docs[0], &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"_aws": map[string]any{
			"Timestamp": float64(now.UnixMilli()),
			"CloudWatchMetrics": []any{map[string]any{
				"Namespace":  "sqs-once",
				"Dimensions": []any{[]any{"FunctionName"}, []any{"FunctionName", "Reason"}},
				"Metrics": []any{
					map[string]any{"Name": "Failed", "Unit": "Count"},
					map[string]any{"Name": "ReplayDelay", "Unit": "Seconds"},
				},
			}},
		},
		"FunctionName": "orders-processor",
		"Reason":       "no-key",
		"Failed":       2.0,
		"ReplayDelay":  []any{1.5},
	}
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(want)
	if !bytes.Equal(a, b) {
		t.Errorf("document\n%s\nwant\n%s", a, b)
	}
}

// TestWriteRefusesWhatCloudWatchWouldDrop: names that would make CloudWatch
// drop the document, or a dimension shadow a metric, are errors, not lines.
func TestWriteRefusesWhatCloudWatchWouldDrop(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		set  *metrics.Set
		fill func(s *metrics.Set)
	}{
		{"empty dimension value", metrics.NewSet(metrics.Dimension{Name: "FunctionName"}), func(s *metrics.Set) { s.Count("Processed", 1) }},
		{"dimension value over 1024 bytes", metrics.NewSet(metrics.Dimension{Name: "FunctionName", Value: strings.Repeat("f", 1025)}), func(s *metrics.Set) { s.Count("Processed", 1) }},
		{"metric named as a dimension", metrics.NewSet(fn), func(s *metrics.Set) { s.Count("FunctionName", 1) }},
		{"extra dimension named as the base", metrics.NewSet(fn), func(s *metrics.Set) { s.Count("Failed", 1, metrics.Dimension{Name: "FunctionName", Value: "x"}) }},
		{"empty metric name", metrics.NewSet(fn), func(s *metrics.Set) { s.Count("", 1) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fill(tt.set)
			var out bytes.Buffer
			if err := tt.set.Write(&out, now); err == nil || out.Len() > 0 {
				t.Errorf("Write = %v and %q, want an error and nothing written", err, out.String())
			}
		})
	}
}

type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	w.n++
	return 0, errors.New("disk full")
}

func TestWriteReportsAFailedWrite(t *testing.T) {
	t.Parallel()
	s := metrics.NewSet(fn)
	s.Count("Processed", 1)
	s.Count("Failed", 1, reason("no-key"))
	w := &failingWriter{}
	if err := s.Write(w, now); err == nil || w.n != 2 {
		t.Errorf("Write = %v after %d writes, want an error after trying both documents", err, w.n)
	}
}

// valid is the specification's example document, with two metrics.
const valid = `{"_aws":{"Timestamp":1574109732004,"CloudWatchMetrics":[{"Namespace":"lambda-function-metrics","Dimensions":[["functionVersion"]],"Metrics":[{"Name":"time","Unit":"Milliseconds","StorageResolution":60},{"Name":"count"}]}]},"functionVersion":"$LATEST","time":100,"count":[1,2],"requestId":"989ffbf8-9ace-4817-a57c-e4dd734019ee"}`

// TestParseChecksTheSpecification: Parse accepts the specification's
// example and refuses each rule broken.
func TestParseChecksTheSpecification(t *testing.T) {
	t.Parallel()
	doc, err := metrics.Parse([]byte(valid))
	if err != nil {
		t.Fatal(err)
	}
	if doc.Timestamp.UnixMilli() != 1574109732004 || doc.Dimensions["functionVersion"] != "$LATEST" ||
		!slices.Equal(doc.Values["time"], []float64{100}) || !slices.Equal(doc.Values["count"], []float64{1, 2}) ||
		doc.Directives[0].Metrics[0].Unit != "Milliseconds" || doc.Directives[0].Metrics[1].Unit != "" {
		t.Errorf("Parse = %+v", doc)
	}
	hundredOne := "[" + strings.TrimSuffix(strings.Repeat("1,", 101), ",") + "]"
	tests := []struct{ name, from, to string }{
		{"trailing data", `"requestId":"989ffbf8-9ace-4817-a57c-e4dd734019ee"}`, `"requestId":"x"} {}`},
		{"no _aws", `"_aws"`, `"aws"`},
		{"timestamp not a number", `"Timestamp":1574109732004`, `"Timestamp":"1574109732004"`},
		{"timestamp fractional", `"Timestamp":1574109732004`, `"Timestamp":1574109732.004`},
		{"no timestamp", `"Timestamp":1574109732004,`, ``},
		{"no CloudWatchMetrics", `"CloudWatchMetrics"`, `"Metrics2"`},
		{"extra _aws member", `"Timestamp":1574109732004,`, `"Timestamp":1574109732004,"Extra":1,`},
		{"empty namespace", `"Namespace":"lambda-function-metrics"`, `"Namespace":""`},
		{"no namespace", `"Namespace":"lambda-function-metrics",`, ``},
		{"no dimensions", `"Dimensions":[["functionVersion"]],`, ``},
		{"dimension member missing", `"functionVersion":"$LATEST",`, ``},
		{"dimension member not a string", `"functionVersion":"$LATEST"`, `"functionVersion":1`},
		{"dimension set over 30", `[["functionVersion"]]`, `[[` + strings.TrimSuffix(strings.Repeat(`"functionVersion",`, 31), ",") + `]]`},
		{"metric member missing", `"time":100,`, ``},
		{"metric member a string", `"time":100`, `"time":"100"`},
		{"metric values empty", `"count":[1,2]`, `"count":[]`},
		{"metric values over 100", `"count":[1,2]`, `"count":` + hundredOne},
		{"unknown unit", `"Unit":"Milliseconds"`, `"Unit":"Millis"`},
		{"storage resolution 5", `"StorageResolution":60`, `"StorageResolution":5`},
		{"extra definition member", `{"Name":"count"}`, `{"Name":"count","Value":1}`},
		{"extra directive member", `"Namespace":"lambda-function-metrics"`, `"Namespace":"lambda-function-metrics","Region":"x"`},
		{"no metric name", `{"Name":"count"}`, `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if !strings.Contains(valid, tt.from) {
				t.Fatalf("%q is not in the valid document", tt.from)
			}
			bad := strings.Replace(valid, tt.from, tt.to, 1)
			if _, err := metrics.Parse([]byte(bad)); err == nil {
				t.Errorf("Parse accepted %s", bad)
			}
		})
	}
}
