package metrics_test

// Fuzz targets of the EMF output: whatever names, units and values a Set is
// given, what Write writes is what CloudWatch reads back, or Write refuses
// it and writes nothing. Plain `go test` runs the seeds and testdata/fuzz;
// `make fuzz` searches further.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sqs-once/sqs-once/internal/metrics"
)

// cloudWatchUnits are the units the EMF specification allows.
var cloudWatchUnits = []metrics.Unit{"Seconds", "Microseconds", "Milliseconds", "Bytes", "Kilobytes", "Megabytes", "Gigabytes",
	"Terabytes", "Bits", "Kilobits", "Megabits", "Gigabits", "Terabits", "Percent", "Count", "Bytes/Second",
	"Kilobytes/Second", "Megabytes/Second", "Gigabytes/Second", "Terabytes/Second", "Bits/Second",
	"Kilobits/Second", "Megabits/Second", "Gigabits/Second", "Terabits/Second", "Count/Second", "None"}

// metricKey is a metric of one document group: the extra dimension's index
// (-1 for none) and its name.
type metricKey struct {
	extra int
	name  string
}

type expected struct {
	count  bool
	unit   metrics.Unit
	clash  bool // used as a counter and a distribution, or with two units
	values []float64
}

// FuzzEMF fills a Set from fuzz input and checks Write against the
// specification: it succeeds exactly when every name, value, unit and
// timestamp is one CloudWatch extracts, and then every line it writes is
// a JSON document metrics.Parse accepts that gives back each counter's sum
// and each distribution's values, under the base dimensions with and
// without the extra one; otherwise it writes nothing.
//
// names, extras ("name=value") and units are NUL-separated lists; each
// three bytes of ops are one call: bit 0 of the first says Count or
// Observe, the rest the metric; the second the extra dimension (0: none)
// and the unit; the third the value, eight bytes of vals read as a float64
// (Observe) or an int32 (Count).
func FuzzEMF(f *testing.F) {
	le := func(fs ...float64) []byte {
		var b []byte
		for _, x := range fs {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
		}
		return b
	}
	f.Add("FunctionName", "orders", "processed\x00duplicate\x00delay", "Reason=timeout\x00Reason=permanent", "Count\x00Seconds",
		[]byte{0, 0, 0, 2, 1, 1, 5, 0, 2, 4, 2, 0}, le(1, 2.5, 3), int64(1_767_225_600_000))
	f.Add("FunctionName", "orders", "delay", "", "Seconds", bytes.Repeat([]byte{5, 0, 0, 5, 0, 1}, 130), le(0.25, 1e300), int64(0))
	f.Add("FunctionName", "orders", "x", "", "Count\x00Seconds", []byte{0, 0, 0, 1, 1, 0}, le(1), int64(1))
	f.Add("FunctionName", "orders", "FunctionName\x00_aws", "", "Count", []byte{0, 0, 0, 2, 0, 0}, le(1), int64(1))
	f.Add("FunctionName", "\xff", "a\xfe\x00a\xfd", "E=\xfc", "Count", []byte{0, 0, 0, 2, 1, 0}, le(1), int64(1))
	f.Add("FunctionName", "orders", "a", "", "Parsecs", []byte{1, 0, 0}, le(1), int64(1))
	f.Add("FunctionName", "orders", "a", "", "Seconds", []byte{1, 0, 0, 1, 0, 1, 1, 0, 2}, le(math.NaN(), math.Inf(1), math.Inf(-1)), int64(1))
	f.Add("FunctionName", "orders", "a", "", "Count", []byte{0, 0, 0}, le(1), int64(-1))
	f.Add("", "", "a", "", "Count", []byte{0, 0, 0}, le(7), int64(1))
	f.Add("FunctionName", strings.Repeat("v", 1025), "a", "", "Count", []byte{0, 0, 0}, le(7), int64(1))
	f.Add("FunctionName", "orders", strings.Repeat("n", 1025), "", "Count", []byte{0, 0, 0}, le(7), int64(1))
	f.Fuzz(func(t *testing.T, baseName, baseValue, names, extras, units string, ops, vals []byte, nowMs int64) {
		var base []metrics.Dimension
		if baseName != "" || baseValue != "" {
			base = []metrics.Dimension{{Name: baseName, Value: baseValue}}
		}
		nameList := strings.Split(names, "\x00")
		unitList := strings.Split(units, "\x00")
		var extraList []metrics.Dimension
		for i, e := range strings.Split(extras, "\x00") {
			if e == "" || i == 4 {
				break
			}
			n, v, _ := strings.Cut(e, "=")
			extraList = append(extraList, metrics.Dimension{Name: n, Value: v})
		}
		value := func(i byte) (float64, int) {
			if len(vals) < 8 {
				return 0, 0
			}
			k := int(i) % (len(vals) / 8)
			bits := binary.LittleEndian.Uint64(vals[8*k:])
			return math.Float64frombits(bits), int(int32(bits))
		}

		s := metrics.NewSet(base...)
		want := map[metricKey]*expected{}
		var order []int // extra indexes in order of first use: the groups
		if len(ops) > 3*400 {
			ops = ops[:3*400]
		}
		for i := 0; i+3 <= len(ops); i += 3 {
			observe := ops[i]&1 == 1
			name := nameList[int(ops[i]>>1)%len(nameList)]
			extra := int(ops[i+1]%byte(len(extraList)+1)) - 1
			unit := metrics.Unit(unitList[int(ops[i+1]>>4)%len(unitList)])
			if !slices.Contains(order, extra) {
				order = append(order, extra)
			}
			var x []metrics.Dimension
			if extra >= 0 {
				x = extraList[extra : extra+1]
			}
			if !observe {
				unit = metrics.Count
			}
			key := metricKey{extra, name}
			e := want[key]
			if e == nil {
				e = &expected{count: !observe, unit: unit}
				if !observe {
					e.values = []float64{0}
				}
				want[key] = e
			}
			f, n := value(ops[i+2])
			if observe {
				s.Observe(name, unit, f, x...)
				e.clash = e.clash || e.count || e.unit != unit
				e.values = append(e.values, f)
			} else {
				s.Count(name, n, x...)
				e.clash = e.clash || !e.count || e.unit != metrics.Count
				e.values[0] += float64(n)
			}
		}
		// Groups with an equal extra dimension are one group.
		for i, a := range extraList {
			for j := range i {
				if extraList[j] == a {
					t.Skip("two equal extra dimensions")
				}
			}
		}

		valid := nowMs >= 0
		for _, extra := range order {
			dims := slices.Clone(base)
			if extra >= 0 {
				dims = append(dims, extraList[extra])
			}
			seen := map[string]bool{"_aws": true}
			for _, d := range dims {
				valid = valid && d.Name != "" && d.Value != "" && len(d.Value) <= 1024 && !seen[d.Name] &&
					utf8.ValidString(d.Name) && utf8.ValidString(d.Value)
				seen[d.Name] = true
			}
			n := 0
			for key, e := range want {
				if key.extra != extra {
					continue
				}
				n++
				valid = valid && key.name != "" && len(key.name) <= 1024 && utf8.ValidString(key.name) && !seen[key.name] &&
					!e.clash && slices.Contains(cloudWatchUnits, e.unit)
				for _, v := range e.values {
					valid = valid && !math.IsNaN(v) && !math.IsInf(v, 0)
				}
			}
			valid = valid && n <= 100
		}

		var out bytes.Buffer
		err := s.Write(&out, time.UnixMilli(nowMs))
		if err != nil {
			if valid {
				t.Fatalf("Write refused a set CloudWatch would extract: %v", err)
			}
			if out.Len() != 0 {
				t.Fatalf("Write refused the set (%v) but wrote %q", err, out.String())
			}
			return
		}
		if !valid {
			t.Fatalf("Write accepted a set CloudWatch would not extract as given: %s", out.String())
		}
		for _, line := range bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n")) {
			if len(order) > 0 && !json.Valid(line) {
				t.Fatalf("invalid JSON: %s", line)
			}
		}
		docs, err := metrics.ParseAll(out.Bytes())
		if err != nil {
			t.Fatalf("Write wrote what CloudWatch does not read: %v\n%s", err, out.String())
		}
		for _, doc := range docs {
			if doc.Timestamp.UnixMilli() != nowMs {
				t.Fatalf("timestamp %v, want %d ms", doc.Timestamp, nowMs)
			}
		}
		total := map[string][]float64{}
		for key, e := range want {
			dims := slices.Clone(base)
			if key.extra >= 0 {
				dims = append(dims, extraList[key.extra])
				total[key.name] = append(total[key.name], e.values...)
			}
			got := metrics.Values(docs, key.name, dims...)
			if key.extra < 0 {
				got = onlyBaseGroup(docs, key.name, base)
			}
			if !sameValues(got, e.values) {
				t.Fatalf("metric %q under %v: CloudWatch reads %v, want %v", key.name, dims, got, e.values)
			}
			groups := 0
			for k := range want {
				if k.name == key.name {
					groups++
				}
			}
			if groups == 1 && metrics.UnitOf(docs, key.name) != e.unit {
				t.Fatalf("metric %q: unit %q, want %q", key.name, metrics.UnitOf(docs, key.name), e.unit)
			}
		}
		// The base dimension set alone keeps the function's total: every
		// group's values.
		for name, extraValues := range total {
			if e := want[metricKey{-1, name}]; e != nil {
				extraValues = append(extraValues, e.values...)
			}
			if got := metrics.Values(docs, name, base...); !sameValues(got, extraValues) {
				t.Fatalf("metric %q under the base dimensions: CloudWatch reads %v, want %v", name, got, extraValues)
			}
		}
	})
}

// onlyBaseGroup is the values of name in the documents without an extra
// dimension.
func onlyBaseGroup(docs []metrics.Document, name string, base []metrics.Dimension) []float64 {
	var out []float64
	for _, d := range docs {
		if len(d.Dimensions) == len(base) {
			out = append(out, metrics.Values([]metrics.Document{d}, name, base...)...)
		}
	}
	return out
}

// sameValues compares as multisets, bit for bit but for the sign of zero.
func sameValues(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzParse reads any line as CloudWatch would: never a panic, and a line
// it accepts is one JSON object whose every dimension and value it names is
// there.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"sqs-once","Dimensions":[["FunctionName"]],"Metrics":[{"Name":"processed","Unit":"Count"}]}]},"FunctionName":"f","processed":1}`))
	f.Add([]byte(`{"_aws":{"Timestamp":"1","CloudWatchMetrics":[]}}`))
	f.Add([]byte(`{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[[5]],"Metrics":[{"Name":"m"}]}]},"m":[1,2]}`))
	f.Add([]byte(`{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"n","Dimensions":[],"Metrics":[{"Name":"m","StorageResolution":1}]}]},"m":1e400}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{} {}`))
	f.Add([]byte(`{"_aws":null}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		doc, err := metrics.Parse(line)
		if err != nil {
			return
		}
		if !json.Valid(line) || bytes.TrimSpace(line)[0] != '{' {
			t.Fatalf("Parse accepted %q", line)
		}
		for _, d := range doc.Directives {
			for _, m := range d.Metrics {
				if len(doc.Values[m.Name]) == 0 || len(doc.Values[m.Name]) > metrics.MaxValues {
					t.Fatalf("metric %q with %d values", m.Name, len(doc.Values[m.Name]))
				}
			}
			for _, set := range d.DimensionSets {
				for _, n := range set {
					if doc.Dimensions[n] == "" {
						t.Fatalf("dimension %q without a value", n)
					}
				}
			}
		}
	})
}
