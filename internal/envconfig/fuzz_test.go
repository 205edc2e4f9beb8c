package envconfig

// A fuzz target of the reader every configuration goes through: any value
// a deployer can type. Plain `go test` runs the seeds and testdata/fuzz;
// `make fuzz` searches further.

import (
	"errors"
	"math"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// maxBound is the largest bound the fuzzer gives Seconds and Int: ten
// years, beyond any limit of the suite.
const maxBound = 10 * 366 * 24 * time.Hour

// FuzzReader reads one value with every reader method, with bounds lo and
// lo+span (folded into [0, maxBound]): never a panic; a value is refused
// with exactly one error naming the variable, and the default returned,
// or accepted within its bounds (Seconds included, for every fraction of a
// second); unset and blank values are the default with no error.
func FuzzReader(f *testing.F) {
	for _, seed := range []struct {
		value    string
		set      bool
		lo, span int64
	}{
		{"7", true, 0, 10},
		{" 7 ", true, 0, 10},
		{"", true, 0, 10},
		{"  ", true, 0, 10},
		{"", false, 0, 10},
		{"1.5", true, int64(time.Second), int64(time.Hour)},
		{"0.000000003", true, 3, 10},
		{"1e-9", true, 1, 1},
		{"43200", true, int64(time.Second), int64(12*time.Hour - time.Second)},
		{"31622400", true, int64(time.Second), int64(366*24*time.Hour - time.Second)},
		{"NaN", true, 0, 10},
		{"-Inf", true, 0, 10},
		{"0x1p-2", true, 0, int64(time.Second)},
		{"1_000", true, 0, 10000},
		{"+5", true, 0, 10},
		{"9223372036854775808", true, 0, 10},
		{"retry", true, 0, 0},
		{"https://sqs.us-east-1.amazonaws.com/123456789012/orders", true, 0, 0},
		{"http://[::1", true, 0, 0},
		{"https://h/", true, 0, 0},
	} {
		f.Add(seed.value, seed.set, seed.lo, seed.span)
	}
	f.Fuzz(func(t *testing.T, value string, set bool, lo, span int64) {
		lo = abs(lo) % int64(maxBound)
		hi := lo + abs(span)%(int64(maxBound)-lo+1)
		lookup := func(string) (string, bool) { return value, set }
		blank := !set || strings.TrimSpace(value) == ""

		check := func(method string, r *Reader, accepted bool) {
			t.Helper()
			err := r.Err()
			if blank && err != nil {
				t.Fatalf("%s of a blank or unset value: %v", method, err)
			}
			var ve *VarError
			if err != nil && (!errors.As(err, &ve) || ve.Name != "V" || !strings.HasPrefix(err.Error(), "environment variable V: ") ||
				strings.Count(err.Error(), "environment variable") != 1) {
				t.Fatalf("%s: error %q does not name V once", method, err)
			}
			if (err == nil) != (accepted || blank) {
				t.Fatalf("%s(%q) accepted: %t, error: %v", method, value, accepted, err)
			}
		}

		r := NewReader(lookup)
		n := r.Int("V", -1, int(lo), int(hi))
		check("Int", r, n >= int(lo) && n <= int(hi) && n != -1)
		if r.Err() == nil && !blank {
			if want, err := strconv.Atoi(strings.TrimSpace(value)); err != nil || want != n {
				t.Fatalf("Int(%q) = %d", value, n)
			}
		}

		r = NewReader(lookup)
		x := r.Float("V", -1, float64(lo), float64(hi))
		check("Float", r, x >= float64(lo) && x <= float64(hi) && !math.IsNaN(x))

		r = NewReader(lookup)
		d := r.Seconds("V", -1, time.Duration(lo), time.Duration(hi))
		check("Seconds", r, d >= time.Duration(lo) && d <= time.Duration(hi))

		r = NewReader(lookup)
		s := r.OneOf("V", "def", "retry", "drop")
		check("OneOf", r, s == "retry" || s == "drop")

		r = NewReader(lookup)
		u := r.QueueURL("V", false)
		check("QueueURL", r, r.Err() == nil)
		if r.Err() == nil && !blank {
			if p, err := url.Parse(u); err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
				t.Fatalf("QueueURL(%q) accepted", value)
			}
		}

		r = NewReader(lookup)
		req := r.Required("V")
		if (r.Err() == nil) != !blank || (!blank && req != strings.TrimSpace(value)) {
			t.Fatalf("Required(%q) = %q, %v", value, req, r.Err())
		}
	})
}

func abs(n int64) int64 {
	if n < 0 {
		if n == math.MinInt64 {
			return math.MaxInt64
		}
		return -n
	}
	return n
}
