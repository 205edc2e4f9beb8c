package faultproxy

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"
)

// Fault is what the proxy does to one request: a Kind constant, or Delay(d).
// It is an interface with an unexported method so that the kinds can be
// constants (nothing can reassign them) and Delay can still carry a duration.
type Fault interface {
	fmt.Stringer
	// parts is the kind and, for Delayed, the delay.
	parts() (Kind, time.Duration)
}

// Kind is a kind of fault. Every Kind but Delayed is itself a Fault.
type Kind uint8

// The kinds of fault.
const (
	// Pass forwards the request and its response unchanged.
	Pass Kind = iota
	// FailBefore answers HTTP 500 with the service's internal error without
	// forwarding: the request is not applied.
	FailBefore
	// FailAfter forwards the request (the service applies it), drops the
	// response and answers HTTP 500 with the service's internal error.
	FailAfter
	// ResetAfter forwards the request (the service applies it), drops the
	// response and resets the client's TCP connection.
	ResetAfter
	// Throttle answers HTTP 400 with the service's throttling error without
	// forwarding: the request is not applied.
	Throttle
	// Delayed is the kind of Delay(d); as a Fault on its own it delays by 0.
	Delayed
	// Answered is the kind of AnswerAfter and AnswerBefore; as a Fault on
	// its own it forwards, then answers 200 with an empty body.
	Answered
)

// String is the kind's name.
func (k Kind) String() string {
	switch k {
	case Pass:
		return "Pass"
	case FailBefore:
		return "FailBefore"
	case FailAfter:
		return "FailAfter"
	case ResetAfter:
		return "ResetAfter"
	case Throttle:
		return "Throttle"
	case Delayed:
		return "Delay"
	case Answered:
		return "Answer"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

func (k Kind) parts() (Kind, time.Duration) { return k, 0 }

// Delay is the fault that holds a request for d before forwarding it. If the
// client gives up first (its context ends, or its connection closes), the
// request is never forwarded, as when a request is lost on the way.
func Delay(d time.Duration) Fault { return delay(max(d, 0)) }

type delay time.Duration

func (d delay) String() string               { return "Delay(" + time.Duration(d).String() + ")" }
func (d delay) parts() (Kind, time.Duration) { return Delayed, time.Duration(d) }

// AnswerAfter is the fault that forwards the request (the service applies
// it), drops the service's answer and answers status, header and body
// instead: an answer the service could give but that no test can make it
// give (a Lambda function error, X-Amz-Function-Error, from an emulator
// whose functions never fail).
func AnswerAfter(status int, header http.Header, body []byte) Fault {
	return answer{status: status, header: header.Clone(), body: bytes.Clone(body), forward: true}
}

// AnswerBefore answers status, header and body without forwarding: the
// request is not applied (an error the emulator never raises, such as
// Lambda's ResourceNotFoundException from a backend that invokes any name).
func AnswerBefore(status int, header http.Header, body []byte) Fault {
	return answer{status: status, header: header.Clone(), body: bytes.Clone(body)}
}

type answer struct {
	status  int
	header  http.Header
	body    []byte
	forward bool
}

func (a answer) String() string {
	if a.forward {
		return fmt.Sprintf("AnswerAfter(%d, %d bytes)", a.status, len(a.body))
	}
	return fmt.Sprintf("AnswerBefore(%d, %d bytes)", a.status, len(a.body))
}
func (a answer) parts() (Kind, time.Duration) { return Answered, 0 }

// KindOf is the kind of f.
func KindOf(f Fault) Kind {
	k, _ := f.parts()
	return k
}

// Rates are the probabilities of each fault for a request that no script
// claims; the remainder passes. Each rate is in [0, 1] and their sum at most 1.
type Rates struct {
	FailBefore float64
	FailAfter  float64
	ResetAfter float64
	Throttle   float64
	Delay      float64
	// MaxDelay bounds a random delay, drawn uniformly from (0, MaxDelay].
	MaxDelay time.Duration
	// Ops are the operations random faults apply to, every one when empty.
	// Other operations pass and draw nothing from the random source, so that
	// they do not shift the fault sequence of the ones under test.
	Ops []string
}

func (r Rates) total() float64 {
	return r.FailBefore + r.FailAfter + r.ResetAfter + r.Throttle + r.Delay
}

func (r Rates) validate() error {
	for _, p := range []float64{r.FailBefore, r.FailAfter, r.ResetAfter, r.Throttle, r.Delay} {
		if !(p >= 0 && p <= 1) {
			return fmt.Errorf("faultproxy: rate %v is not in [0, 1]", p)
		}
	}
	// A little slack for rates such as 0.1+0.2+0.7 that are 1 on paper.
	if sum := r.total(); sum > 1+1e-9 {
		return fmt.Errorf("faultproxy: rates add up to %v, more than 1", sum)
	}
	if r.Delay > 0 && r.MaxDelay <= 0 {
		return errors.New("faultproxy: a Delay rate needs a positive MaxDelay")
	}
	return nil
}

func (r Rates) applies(op string) bool { return len(r.Ops) == 0 || slices.Contains(r.Ops, op) }

// pick draws one fault: one value from rng, and a second for a delay's
// length, so that a seed fixes the sequence of faults for a sequence of
// requests.
func (r Rates) pick(rng *rand.Rand) Fault {
	u := rng.Float64()
	for _, c := range []struct {
		p float64
		k Kind
	}{{r.FailBefore, FailBefore}, {r.FailAfter, FailAfter}, {r.ResetAfter, ResetAfter}, {r.Throttle, Throttle}, {r.Delay, Delayed}} {
		if u < c.p {
			if c.k == Delayed {
				return Delay(time.Duration(rng.Int64N(int64(r.MaxDelay))) + 1)
			}
			return c.k
		}
		u -= c.p
	}
	return Pass
}
