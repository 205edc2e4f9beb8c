package envconfig

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Lookup has the signature of os.LookupEnv; tests pass a map's lookup instead.
type Lookup func(name string) (string, bool)

// Map turns a map into a Lookup.
func Map(m map[string]string) Lookup {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// Reader reads variables and collects every problem, so a user fixing a
// configuration sees all bad variables at once rather than one per deploy.
type Reader struct {
	lookup Lookup
	errs   []error
}

// NewReader returns a Reader over lookup.
func NewReader(lookup Lookup) *Reader { return &Reader{lookup: lookup} }

// Err returns every problem found so far, or nil.
func (r *Reader) Err() error { return errors.Join(r.errs...) }

// Fail records a problem with a variable that the caller validated itself.
func (r *Reader) Fail(name, format string, args ...any) {
	r.errs = append(r.errs, &VarError{Name: name, Msg: fmt.Sprintf(format, args...)})
}

// VarError is a bad or missing environment variable.
type VarError struct {
	Name string
	Msg  string
}

func (e *VarError) Error() string { return "environment variable " + e.Name + ": " + e.Msg }

// value returns the trimmed value; an empty value counts as unset, because
// CloudFormation cannot remove a variable, only blank it.
func (r *Reader) value(name string) (string, bool) {
	v, ok := r.lookup(name)
	v = strings.TrimSpace(v)
	return v, ok && v != ""
}

// String returns the variable or def when unset.
func (r *Reader) String(name, def string) string {
	if v, ok := r.value(name); ok {
		return v
	}
	return def
}

// Required returns the variable and records an error when it is unset.
func (r *Reader) Required(name string) string {
	v, ok := r.value(name)
	if !ok {
		r.Fail(name, "required but not set")
	}
	return v
}

// Int returns the variable as an integer in [lo, hi], or def when unset.
func (r *Reader) Int(name string, def, lo, hi int) int {
	v, ok := r.value(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		r.Fail(name, "%q is not a whole number from %d to %d", v, lo, hi)
		return def
	}
	return n
}

// Float returns the variable as a finite number in [lo, hi], or def when unset.
func (r *Reader) Float(name string, def, lo, hi float64) float64 {
	v, ok := r.value(name)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < lo || f > hi {
		r.Fail(name, "%q is not a number from %s to %s", v, decimal(lo), decimal(hi))
		return def
	}
	return f
}

// decimal writes a bound as a person types it: 31622400, 0.5, never
// 3.16224e+07, so the message can be compared with the documented range.
func decimal(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// Seconds returns the variable, a number of seconds (fractions allowed, cut
// to the nanosecond), as a duration in [lo, hi], or def when unset.
func (r *Reader) Seconds(name string, def, lo, hi time.Duration) time.Duration {
	v, ok := r.value(name)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	ns := math.Trunc(f * float64(time.Second))
	// The bounds are compared as durations: in float seconds, a bound that is
	// not a whole number of seconds rounds, and a value just past it got in.
	if err != nil || !(math.Abs(ns) < 1<<63) || time.Duration(ns) < lo || time.Duration(ns) > hi {
		r.Fail(name, "%q is not a number from %s to %s", v, decimal(lo.Seconds()), decimal(hi.Seconds()))
		return def
	}
	return time.Duration(ns)
}

// OneOf returns the variable, which must be one of allowed, or def when unset.
func (r *Reader) OneOf(name, def string, allowed ...string) string {
	v, ok := r.value(name)
	if !ok {
		return def
	}
	if !slices.Contains(allowed, v) {
		r.Fail(name, "%q is not one of %s", v, strings.Join(allowed, ", "))
		return def
	}
	return v
}

// QueueURL returns the variable, which must be an SQS queue URL; an unset
// optional one is "".
func (r *Reader) QueueURL(name string, required bool) string {
	var v string
	if required {
		v = r.Required(name)
	} else {
		v = r.String(name, "")
	}
	if v == "" {
		return ""
	}
	if u, err := url.Parse(v); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || len(u.Path) < 2 {
		r.Fail(name, "%q is not a queue URL such as https://sqs.us-east-1.amazonaws.com/123456789012/orders", v)
	}
	return v
}
