package faultproxy

import (
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestIdentifyNamesTheOperation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, target, query, contentType, body string
		wantOp, wantTarget                     string
	}{
		{name: "dynamodb json", target: "DynamoDB_20120810.PutItem", contentType: "application/x-amz-json-1.0", body: `{"TableName":"t"}`, wantOp: "PutItem", wantTarget: "DynamoDB_20120810"},
		{name: "sqs json", target: "AmazonSQS.SendMessageBatch", contentType: "application/x-amz-json-1.0", wantOp: "SendMessageBatch", wantTarget: "AmazonSQS"},
		{name: "query form", contentType: "application/x-www-form-urlencoded; charset=utf-8", body: "Action=ListStacks&Version=2010-05-15", wantOp: "ListStacks"},
		{name: "query string", query: "Action=GetCallerIdentity", wantOp: "GetCallerIdentity"},
		{name: "target wins over Action", target: "AmazonSQS.ReceiveMessage", query: "Action=ListQueues", wantOp: "ReceiveMessage", wantTarget: "AmazonSQS"},
		{name: "form body of another type is not parsed", contentType: "application/json", body: "Action=ListStacks"},
		{name: "nothing to go by", body: "{}"},
		{name: "target without an operation", target: "AmazonSQS", wantTarget: "AmazonSQS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodPost, "/?"+tc.query, strings.NewReader(tc.body))
			if tc.target != "" {
				r.Header.Set("X-Amz-Target", tc.target)
			}
			if tc.contentType != "" {
				r.Header.Set("Content-Type", tc.contentType)
			}
			c := identify(r, []byte(tc.body))
			if c.op != tc.wantOp || c.target != tc.wantTarget {
				t.Errorf("identify = op %q target %q, want op %q target %q", c.op, c.target, tc.wantOp, tc.wantTarget)
			}
		})
	}
}

func TestRatesValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		rates Rates
		ok    bool
	}{
		{"none", Rates{}, true},
		{"all of them", Rates{FailBefore: 0.2, FailAfter: 0.2, ResetAfter: 0.2, Throttle: 0.2, Delay: 0.2, MaxDelay: time.Millisecond}, true},
		{"negative", Rates{Throttle: -0.1}, false},
		{"not a number", Rates{FailAfter: math.NaN()}, false},
		{"over 1 in total", Rates{FailBefore: 0.6, FailAfter: 0.6}, false},
		{"delay without a bound", Rates{Delay: 0.1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if err := tc.rates.validate(); (err == nil) != tc.ok {
				t.Errorf("validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestPickIsReproducibleFromTheSeed(t *testing.T) {
	t.Parallel()
	rates := Rates{FailBefore: 0.1, FailAfter: 0.1, ResetAfter: 0.1, Throttle: 0.1, Delay: 0.1, MaxDelay: 50 * time.Millisecond}
	draw := func(seed uint64) []Fault {
		rng := rand.New(rand.NewPCG(seed, 0))
		out := make([]Fault, 500)
		for i := range out {
			out[i] = rates.pick(rng)
		}
		return out
	}
	a, b := draw(1), draw(1)
	if !slices.Equal(a, b) {
		t.Fatal("the same seed gave two different fault sequences")
	}
	if slices.Equal(a, draw(2)) {
		t.Error("two seeds gave the same 500 faults: the seed is not used")
	}
	seen := map[Kind]int{}
	for _, f := range a {
		k, d := f.parts()
		seen[k]++
		if k == Delayed && (d <= 0 || d > rates.MaxDelay) {
			t.Errorf("delay %v outside (0, %v]", d, rates.MaxDelay)
		}
	}
	for _, k := range []Kind{Pass, FailBefore, FailAfter, ResetAfter, Throttle, Delayed} {
		if seen[k] == 0 {
			t.Errorf("no %v in 500 draws at these rates: %v", k, seen)
		}
	}
}

func TestDecideScriptsFirstThenRandomOnlyForChosenOps(t *testing.T) {
	t.Parallel()
	newProxy := func(t *testing.T) *Proxy {
		p, err := Start("http://127.0.0.1:1", WithRandom(Rates{Throttle: 0.5, Ops: []string{"PutItem"}}, rand.New(rand.NewPCG(9, 9))))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		return p
	}
	puts := func(p *Proxy, interleave bool) []Fault {
		var out []Fault
		for range 50 {
			if interleave {
				if f := p.decide("GetItem", nil); f != Pass {
					t.Fatalf("GetItem, outside Rates.Ops, got %v", f)
				}
			}
			out = append(out, p.decide("PutItem", nil))
		}
		return out
	}
	// Requests for other operations draw nothing, so the faults of the
	// operations under test do not depend on what else the run does.
	if a, b := puts(newProxy(t), false), puts(newProxy(t), true); !slices.Equal(a, b) {
		t.Errorf("interleaved GetItems changed the PutItem faults:\n%v\n%v", a, b)
	}

	p := newProxy(t)
	p.Script("UpdateItem", FailAfter, Delay(time.Second))
	p.ScriptWhen(AnyOperation, BodyContains("COMPLETED"), ResetAfter)
	p.Script("PutItem", FailBefore)
	for _, step := range []struct {
		op, body string
		want     Fault
	}{
		{"UpdateItem", "COMPLETED", FailAfter}, // the first script claims it
		{"PutItem", "PROCESSING", FailBefore},  // the only script for PutItem
		{"DeleteItem", "COMPLETED", ResetAfter},
		{"UpdateItem", "", Delay(time.Second)},
		{"UpdateItem", "COMPLETED", Pass}, // every script used up
		{"DeleteItem", "COMPLETED", Pass},
	} {
		if got := p.decide(step.op, []byte(step.body)); got != step.want {
			t.Errorf("%s %q: fault %v, want %v", step.op, step.body, got, step.want)
		}
	}
	if n := p.Pending(); n != 0 {
		t.Errorf("Pending() = %d after every scripted fault was used", n)
	}
}

func TestStartRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, target string
		opts         []Option
	}{
		{"no scheme", "127.0.0.1:5000", nil},
		{"a path", "http://127.0.0.1:5000/api", nil},
		{"rates without a source", "http://127.0.0.1:5000", []Option{WithRandom(Rates{Throttle: 0.1}, nil)}},
		{"bad rates", "http://127.0.0.1:5000", []Option{WithRandom(Rates{Throttle: 2}, rand.New(rand.NewPCG(1, 1)))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if p, err := Start(tc.target, tc.opts...); err == nil {
				_ = p.Close()
				t.Error("Start succeeded")
			}
		})
	}
}
