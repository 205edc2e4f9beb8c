package jitter

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Strategy is how a delay is drawn below the exponential ceiling.
type Strategy string

// Strategies, after the AWS Architecture Blog post "Exponential Backoff And
// Jitter". c is Ceiling(n), r the random value in [0, 1).
const (
	Full         Strategy = "full"         // r·c: spreads retries the most
	Equal        Strategy = "equal"        // c/2 + r·c/2: never shorter than half the ceiling
	Decorrelated Strategy = "decorrelated" // base + r·(3·Ceiling(n-1) − base), capped
	None         Strategy = "none"         // c: deterministic
	// HalfOff is c − r·c/2: r takes up to half off the ceiling. Its range
	// and spread are Equal's, read from the other end, so that r = 1 gives
	// the shortest delay: the lock's wait for another holder bounds its
	// reads with the shortest intervals, Delay(n, 1), and its documented
	// values are drawn that way round. It is not in Strategies: a
	// configuration that names a strategy gains nothing over Equal from it.
	HalfOff Strategy = "half-off"
)

// Strategies lists the strategies a configuration may name (ParseStrategy),
// the default first.
var Strategies = []Strategy{Full, Equal, Decorrelated, None}

// ParseStrategy reads a strategy name, ignoring case and surrounding space.
func ParseStrategy(s string) (Strategy, error) {
	for _, st := range Strategies {
		if strings.EqualFold(strings.TrimSpace(s), string(st)) {
			return st, nil
		}
	}
	return "", fmt.Errorf("jitter: unknown strategy %q (want one of full, equal, decorrelated, none)", s)
}

// Policy is an exponential backoff: attempt n has the ceiling
// min(Cap, Base·Rate^n), and Strategy draws the delay below it.
//
// No field value makes Delay unbounded: Rate below 1 or NaN counts as 1, a
// negative Base or Cap as 0, an unknown Strategy as Full. Configuration
// readers check ranges themselves, so that a bad value names its variable.
type Policy struct {
	Base     time.Duration
	Rate     float64
	Cap      time.Duration
	Strategy Strategy
}

// Ceiling is min(Cap, Base·Rate^n); n below 0 counts as 0. A huge n or Rate
// saturates at Cap instead of overflowing.
func (p Policy) Ceiling(n int) time.Duration { return p.toDuration(p.ceiling(n)) }

// Delay is the delay before attempt n, drawn with r, a random value in [0, 1)
// (values outside are clamped). It is always within [0, Cap].
func (p Policy) Delay(n int, r float64) time.Duration {
	if !(r >= 0) {
		r = 0
	}
	r = min(r, 1)
	c := p.ceiling(n)
	switch p.Strategy {
	case Equal:
		return p.toDuration(c/2 + r*c/2)
	case Decorrelated:
		// The blog's formula needs the previous sleep; a stateless caller
		// (the replayer keeps no state between replays) uses the ceiling of
		// the previous attempt in its place.
		lo := min(p.base(), p.cap())
		return p.toDuration(lo + r*(min(p.cap(), 3*p.ceiling(n-1))-lo))
	case None:
		return p.toDuration(c)
	case HalfOff:
		// In whole Durations, as the lock has always computed its waits:
		// the ceiling less the truncated half, so that every draw keeps its
		// nanosecond value.
		step := p.toDuration(c)
		return step - time.Duration(r*float64(step/2))
	default:
		return p.toDuration(r * c)
	}
}

// RoundUp is d rounded up to a multiple of unit: a delay in the whole
// seconds SQS takes (RoundUp(d, time.Second)) is never shorter than the one
// drawn. A unit of 0 or less returns d unchanged, as Duration.Truncate does;
// a d whose next multiple does not fit in a Duration saturates at the
// largest multiple that does.
func RoundUp(d, unit time.Duration) time.Duration {
	if unit <= 0 {
		return d
	}
	rem := d % unit
	switch {
	case rem == 0:
		return d
	case rem < 0: // toward zero is up for a negative d
		return d - rem
	case d > math.MaxInt64-(unit-rem):
		return math.MaxInt64 - math.MaxInt64%unit
	}
	return d + unit - rem
}

// ceiling works in float nanoseconds: math.Pow saturates at +Inf instead of
// wrapping, and the comparison turns that into Cap.
func (p Policy) ceiling(n int) float64 {
	rate := p.Rate
	if !(rate >= 1) {
		rate = 1
	}
	x := p.base() * math.Pow(rate, float64(max(n, 0)))
	if !(x < p.cap()) {
		return p.cap()
	}
	return x
}

func (p Policy) base() float64 { return float64(max(p.Base, 0)) }
func (p Policy) cap() float64  { return float64(max(p.Cap, 0)) }

// toDuration converts without overflow: float64(Cap) may round above the
// largest Duration, so anything at or above it is Cap itself.
func (p Policy) toDuration(ns float64) time.Duration {
	switch {
	case !(ns > 0):
		return 0
	case ns >= p.cap():
		return max(p.Cap, 0)
	}
	return time.Duration(ns)
}
