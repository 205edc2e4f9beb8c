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
		{"half-off", "", true}, // the lock's, not a configuration's
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
// beyond), edge rates and out-of-range random values, and reaches both ends:
// r = 0 the low end and r = 1 the high one, HalfOff the other way round.
func TestDelayBounds(t *testing.T) {
	t.Parallel()
	caps := []time.Duration{900 * time.Second, 12 * time.Hour, math.MaxInt64}
	rates := []float64{1, 1.0001, 2, 3, 10, 1e6, math.MaxFloat64, math.Inf(1)}
	ns := append(seq(1, 64), 1000, math.MaxInt)
	for _, st := range append(slices.Clone(Strategies), HalfOff) {
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
						atLo, atHi := p.Delay(n, 0), p.Delay(n, 1)
						if st == HalfOff {
							atLo, atHi = atHi, atLo
						}
						if !near(atLo, lo, tol) || !near(atHi, hi, tol) {
							t.Fatalf("rate %g cap %v n=%d: range [%v, %v], want [%v, %v]", rate, c, n, atLo, atHi, lo, hi)
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
	case HalfOff:
		return c - c/2, c
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

// HalfOff draws the lock's waits for another holder (50 ms doubling to 1 s,
// r taking up to half off) to the nanosecond: the ceiling less the
// truncated half, never rounded in floating point.
func TestHalfOff(t *testing.T) {
	t.Parallel()
	wait := Policy{Base: 50 * time.Millisecond, Rate: 2, Cap: time.Second, Strategy: HalfOff}
	tests := []struct {
		n    int
		r    float64
		want time.Duration
	}{
		{0, 0, 50 * time.Millisecond},
		{0, 1, 25 * time.Millisecond},
		{0, 0.5, 37500 * time.Microsecond},
		{0, 0.999999, 25000025}, // 50 ms less ⌊0.999999·25 ms⌋ = 24999975 ns
		{1, 0, 100 * time.Millisecond},
		{4, 1, 400 * time.Millisecond},
		{5, 0, time.Second}, // 1.6 s, capped
		{5, 1, 500 * time.Millisecond},
		{math.MaxInt, 0.25, 875 * time.Millisecond},
		{-3, 0, 50 * time.Millisecond},
		{0, math.NaN(), 50 * time.Millisecond},
		{0, 7, 25 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := wait.Delay(tt.n, tt.r); got != tt.want {
			t.Errorf("Delay(%d, %g) = %d ns, want %d ns", tt.n, tt.r, got, tt.want)
		}
	}
}

func TestRoundUp(t *testing.T) {
	t.Parallel()
	const maxSecond = math.MaxInt64 - math.MaxInt64%time.Second
	tests := []struct {
		d, unit, want time.Duration
	}{
		{0, time.Second, 0},
		{1, time.Second, time.Second},
		{time.Second, time.Second, time.Second},
		{1500 * time.Millisecond, time.Second, 2 * time.Second},
		{time.Second + 1, time.Second, 2 * time.Second},
		{-1500 * time.Millisecond, time.Second, -time.Second},
		{-time.Second, time.Second, -time.Second},
		{math.MinInt64, time.Second, math.MinInt64 - math.MinInt64%time.Second},
		{math.MaxInt64, time.Second, maxSecond},
		{maxSecond + 1, time.Second, maxSecond},
		{maxSecond, time.Second, maxSecond},
		{1500 * time.Millisecond, 0, 1500 * time.Millisecond},
		{1500 * time.Millisecond, -time.Second, 1500 * time.Millisecond},
		{7, 3, 9},
	}
	for _, tt := range tests {
		if got := RoundUp(tt.d, tt.unit); got != tt.want {
			t.Errorf("RoundUp(%d, %d) = %d, want %d", tt.d, tt.unit, got, tt.want)
		}
	}
}

// RoundUp returns the smallest multiple of unit at or above d, or, where
// that does not fit in a Duration, the largest multiple that does.
func FuzzRoundUp(f *testing.F) {
	for _, seed := range [][2]int64{{0, 1}, {1, int64(time.Second)}, {-1, 3}, {math.MaxInt64, 7}, {math.MinInt64, int64(time.Second)}, {5, 0}, {5, -2}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, d, unit int64) {
		got := RoundUp(time.Duration(d), time.Duration(unit))
		if unit <= 0 {
			if got != time.Duration(d) {
				t.Fatalf("RoundUp(%d, %d) = %d, want d unchanged", d, unit, got)
			}
			return
		}
		if got%time.Duration(unit) != 0 {
			t.Fatalf("RoundUp(%d, %d) = %d, not a multiple", d, unit, got)
		}
		if int64(got) >= d {
			if int64(got)-d >= unit { // no overflow: both are at least d
				t.Fatalf("RoundUp(%d, %d) = %d, a unit or more above d", d, unit, got)
			}
			return
		}
		// below d only when saturating: got is then the largest multiple,
		// and the next one, the first at or above d, does not fit
		if largest := int64(math.MaxInt64) - math.MaxInt64%unit; int64(got) != largest {
			t.Fatalf("RoundUp(%d, %d) = %d, below d but not the largest multiple %d", d, unit, got, largest)
		}
	})
}
