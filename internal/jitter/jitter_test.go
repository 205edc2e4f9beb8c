package jitter

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestParseStrategy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    Strategy
		wantErr bool
	}{
		{"full", Full, false},
		{" FULL ", Full, false},
		{"equal", Equal, false},
		{"Decorrelated", Decorrelated, false},
		{"none", None, false},
		{"", "", true},
		{"exponential", "", true},
	}
	for _, tt := range tests {
		got, err := ParseStrategy(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParseStrategy(%q) = %q, %v; want %q, error %t", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestCeiling(t *testing.T) {
	t.Parallel()
	replay := Policy{Base: 2 * time.Second, Rate: 2, Cap: 900 * time.Second}
	processor := Policy{Base: time.Second, Rate: 2, Cap: 12 * time.Hour}
	tests := []struct {
		name string
		p    Policy
		n    int
		want time.Duration
	}{
		{"replay n=1", replay, 1, 4 * time.Second},
		{"replay n=2", replay, 2, 8 * time.Second},
		{"replay n=3", replay, 3, 16 * time.Second},
		{"replay n=8", replay, 8, 512 * time.Second},
		{"replay capped n=9", replay, 9, 900 * time.Second},
		{"n=0 is the base", replay, 0, 2 * time.Second},
		{"negative n is the base", replay, -5, 2 * time.Second},
		{"huge n saturates", replay, math.MaxInt, 900 * time.Second},
		{"rate 1 stays at base", Policy{Base: 3 * time.Second, Rate: 1, Cap: time.Minute}, math.MaxInt, 3 * time.Second},
		{"rate +Inf at n=0", Policy{Base: time.Second, Rate: math.Inf(1), Cap: time.Minute}, 0, time.Second},
		{"rate +Inf", Policy{Base: time.Second, Rate: math.Inf(1), Cap: time.Minute}, 1, time.Minute},
		{"rate NaN counts as 1", Policy{Base: time.Second, Rate: math.NaN(), Cap: time.Minute}, 40, time.Second},
		{"base above cap", Policy{Base: time.Hour, Rate: 2, Cap: time.Minute}, 0, time.Minute},
		{"zero base", Policy{Rate: 2, Cap: time.Minute}, 5, 0},
		{"processor 12 h cap", processor, 64, 12 * time.Hour},
		{"largest cap", Policy{Base: time.Second, Rate: 10, Cap: math.MaxInt64}, 1000, math.MaxInt64},
	}
	for _, tt := range tests {
		if got := tt.p.Ceiling(tt.n); got != tt.want {
			t.Errorf("%s: Ceiling(%d) = %v, want %v", tt.name, tt.n, got, tt.want)
		}
	}
}

// Every strategy stays within its documented range for n = 1..64 (and
// beyond), edge rates and out-of-range random values, and reaches both ends.
func TestDelayBounds(t *testing.T) {
	t.Parallel()
	caps := []time.Duration{900 * time.Second, 12 * time.Hour, math.MaxInt64}
	rates := []float64{1, 1.0001, 2, 3, 10, 1e6, math.MaxFloat64, math.Inf(1)}
	ns := append(seq(1, 64), 1000, math.MaxInt)
	for _, st := range Strategies {
		t.Run(string(st), func(t *testing.T) {
			t.Parallel()
			for _, c := range caps {
				for _, rate := range rates {
					p := Policy{Base: 2 * time.Second, Rate: rate, Cap: c, Strategy: st}
					for _, n := range ns {
						lo, hi := bounds(p, n)
						// float64 carries 53 bits and Durations truncate: allow a
						// few ns of rounding, never past the cap
						tol := time.Duration(float64(hi)*1e-12) + 4
						for _, r := range []float64{0, 0.25, 0.5, 0.999999, -1, math.NaN(), 1, 7, math.Inf(1)} {
							d := p.Delay(n, r)
							if (d < lo && lo-d > tol) || (d > hi && d-hi > tol) || d > c || d < 0 {
								t.Fatalf("rate %g cap %v n=%d r=%g: delay %v outside [%v, %v]", rate, c, n, r, d, lo, hi)
							}
						}
						if !near(p.Delay(n, 0), lo, tol) || !near(p.Delay(n, 1), hi, tol) {
							t.Fatalf("rate %g cap %v n=%d: range [%v, %v], want [%v, %v]", rate, c, n, p.Delay(n, 0), p.Delay(n, 1), lo, hi)
						}
					}
				}
			}
		})
	}
}

// bounds is each strategy's documented range.
func bounds(p Policy, n int) (lo, hi time.Duration) {
	c := p.Ceiling(n)
	switch p.Strategy {
	case Full:
		return 0, c
	case Equal:
		return c / 2, c
	case Decorrelated:
		if prev := p.Ceiling(n - 1); prev < p.Cap/3 {
			return min(p.Base, p.Cap), 3 * prev
		}
		return min(p.Base, p.Cap), p.Cap
	}
	return c, c
}

// near compares non-negative durations without overflowing.
func near(a, b, tol time.Duration) bool { return max(a, b)-min(a, b) <= tol }

func seq(from, to int) []int {
	var s []int
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// Full jitter is uniform on [0, ceiling]: a Kolmogorov–Smirnov test with a
// fixed seed, at the 99.9% level so only a real skew fails it.
func TestFullIsUniform(t *testing.T) {
	t.Parallel()
	const samples = 20000
	p := Policy{Base: 2 * time.Second, Rate: 2, Cap: 900 * time.Second, Strategy: Full}
	c := p.Ceiling(3).Seconds()
	rng := rand.New(rand.NewPCG(1, 2))
	xs := make([]float64, samples)
	sum := 0.0
	for i := range xs {
		xs[i] = p.Delay(3, rng.Float64()).Seconds() / c
		sum += xs[i]
	}
	slices.Sort(xs)
	d := 0.0
	for i, x := range xs {
		d = max(d, math.Abs(float64(i+1)/samples-x), math.Abs(x-float64(i)/samples))
	}
	if limit := 1.95 / math.Sqrt(samples); d > limit {
		t.Errorf("KS distance %.4f from uniform exceeds %.4f", d, limit)
	}
	if mean := sum / samples; math.Abs(mean-0.5) > 0.01 {
		t.Errorf("mean delay %.3f of the ceiling, want 0.5", mean)
	}
}
