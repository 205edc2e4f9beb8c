package demo

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// The -chaos levels.
const (
	ChaosLight = "light"
	ChaosHeavy = "heavy"
)

// chaosLevel is what one -chaos level injects: HTTP faults at these rates
// into every AWS call of the pipeline (producer, event source mappings,
// processor, replayer), and crashes keys that hang after their side effect.
type chaosLevel struct {
	rates   faultproxy.Rates
	crashes int
}

// chaosLevelOf is the level named by -chaos; ok is false for "" and unknown
// names. The rates are per call: heavy makes about one call in six go wrong,
// which the SDK's retries (3 attempts) mostly absorb, so that what reaches
// sqs-once is the rarer case of a call that fails for good or was applied
// although it failed.
func chaosLevelOf(name string) (chaosLevel, bool) {
	switch name {
	case ChaosLight:
		return chaosLevel{crashes: 1, rates: faultproxy.Rates{
			FailBefore: 0.01, FailAfter: 0.01, ResetAfter: 0.005, Throttle: 0.01,
			Delay: 0.02, MaxDelay: 200 * time.Millisecond,
		}}, true
	case ChaosHeavy:
		return chaosLevel{crashes: 3, rates: faultproxy.Rates{
			FailBefore: 0.04, FailAfter: 0.04, ResetAfter: 0.02, Throttle: 0.04,
			Delay: 0.05, MaxDelay: 500 * time.Millisecond,
		}}, true
	}
	return chaosLevel{}, false
}

// chaosSeedStream separates the fault proxy's random sequence from the
// workload's and the backoffs', which draw from the same -seed.
const chaosSeedStream = 0xc4a05

// ChaosStats are the faults the proxy injected, by kind and by operation.
type ChaosStats struct {
	Level string `json:"level"`
	// Calls is every AWS call the proxy saw; Faults the faults it injected
	// by kind (FailBefore, FailAfter, ResetAfter, Throttle, Delay).
	Calls  int                       `json:"calls"`
	Faults map[string]int            `json:"faults"`
	ByOp   map[string]map[string]int `json:"byOperation"`
	// Crashes is the keys made to crash after their side effect.
	Crashes int `json:"crashes"`
	// CompletionFaults is the keys whose COMPLETED write had a fault
	// injected (one that was not applied, or whose answer was lost): what
	// explains a completion that could not be recorded.
	CompletionFaults int `json:"completionFaults"`
}

// chaosLog records what the fault proxy injected. It is safe for concurrent
// use (the proxy calls observe from its request goroutines).
type chaosLog struct {
	mu     sync.Mutex
	calls  int
	faults map[faultproxy.Kind]int
	byOp   map[string]map[string]int
	// completion holds the record ids whose COMPLETED write had a fault.
	completion map[string]bool
	// invocations holds the processor's invocations (by request id) that
	// had a fault injected into one of their calls: a delay, or a failure
	// the SDK or the processor waited out and retried, spends the
	// invocation's time, and may leave too little for another key's
	// completion.
	invocations map[string]bool
}

func newChaosLog() *chaosLog {
	return &chaosLog{faults: map[faultproxy.Kind]int{}, byOp: map[string]map[string]int{}, completion: map[string]bool{}, invocations: map[string]bool{}}
}

// invocationHeader names, on the processor's calls through a fault proxy,
// the invocation that made them (its request id), so that the report can
// tie a fault to every key of that invocation, not only to the call's own.
const invocationHeader = "X-Sqs-Once-Demo-Invocation"

// tagInvocation is the processor's HTTP client under -chaos: it sets
// invocationHeader from the Lambda context the call was made in. The header
// is added after signing, so it is not signed; the proxy reads it and
// forwards it with the rest.
type tagInvocation struct{ next aws.HTTPClient }

func (t tagInvocation) Do(req *http.Request) (*http.Response, error) {
	if lc, ok := lambdacontext.FromContext(req.Context()); ok && lc.AwsRequestID != "" {
		req.Header.Set(invocationHeader, lc.AwsRequestID)
	}
	return t.next.Do(req)
}

// observe is the proxy's observer.
func (c *chaosLog) observe(op string, body []byte, header http.Header, f faultproxy.Fault) {
	k := faultproxy.KindOf(f)
	var record string
	if k != faultproxy.Pass && k != faultproxy.Delayed {
		switch op {
		case "UpdateItem":
			record = completedRecord(body)
		case "TransactWriteItems":
			record = committedRecord(body)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if k == faultproxy.Pass {
		return
	}
	c.faults[k]++
	if c.byOp[op] == nil {
		c.byOp[op] = map[string]int{}
	}
	c.byOp[op][k.String()]++
	if record != "" {
		c.completion[record] = true
	}
	if inv := header.Get(invocationHeader); inv != "" {
		c.invocations[inv] = true
	}
}

// completedRecord is the record id of an UpdateItem that sets a record
// COMPLETED, or "" for any other update (an acquire, a renewal, a release).
func completedRecord(body []byte) string {
	var in struct {
		Key                       map[string]map[string]string
		ExpressionAttributeValues map[string]map[string]string
		ReturnValues              string
	}
	if json.Unmarshal(body, &in) != nil || in.ReturnValues == "ALL_OLD" {
		return ""
	}
	for _, v := range in.ExpressionAttributeValues {
		if v["S"] == string(store.StatusCompleted) {
			return in.Key[dynamostore.AttrID]["S"]
		}
	}
	return ""
}

// committedRecord is the record id of a TransactWriteItems that sets a
// record COMPLETED (-tx's commit), or "".
func committedRecord(body []byte) string {
	var in struct {
		TransactItems []struct {
			Update *struct {
				Key                       map[string]map[string]any
				ExpressionAttributeValues map[string]map[string]any
			}
		}
	}
	if json.Unmarshal(body, &in) != nil {
		return ""
	}
	for _, it := range in.TransactItems {
		if it.Update == nil {
			continue
		}
		for _, v := range it.Update.ExpressionAttributeValues {
			if v["S"] == string(store.StatusCompleted) {
				id, _ := it.Update.Key[dynamostore.AttrID]["S"].(string)
				return id
			}
		}
	}
	return ""
}

// hitCompletion reports whether a fault was injected into a COMPLETED write
// of record id.
func (c *chaosLog) hitCompletion(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.completion[id]
}

// hitInvocation reports whether a fault was injected into a call of the
// invocation with request id.
func (c *chaosLog) hitInvocation(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.invocations[id]
}

// stats is the report's view of the log.
func (c *chaosLog) stats(level string, crashes int) *ChaosStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := &ChaosStats{Level: level, Calls: c.calls, Faults: map[string]int{}, ByOp: map[string]map[string]int{}, Crashes: crashes, CompletionFaults: len(c.completion)}
	for k, n := range c.faults {
		st.Faults[k.String()] = n
	}
	for op, m := range c.byOp {
		st.ByOp[op] = maps.Clone(m)
	}
	return st
}

// startChaos starts a fault proxy in front of endpoint for -chaos level,
// drawing from stream of seed (one stream per proxy).
func startChaos(endpoint, level string, seed, stream uint64, log *chaosLog) (*faultproxy.Proxy, error) {
	c, ok := chaosLevelOf(level)
	if !ok {
		return nil, fmt.Errorf("-chaos %q: unknown level", level)
	}
	return faultproxy.Start(endpoint,
		faultproxy.WithRandom(c.rates, rand.New(rand.NewPCG(seed, chaosSeedStream+stream))),
		faultproxy.WithObserver(log.observe))
}

// renderChaos is the report's list of injected faults, next to the outcome.
func (s Summary) renderChaos(p printer) {
	c := s.Chaos
	if c == nil {
		return
	}
	total := 0
	for _, n := range c.Faults {
		total += n
	}
	p("chaos (%s)         %s injected into %s, and %s crashed after their side effect", c.Level, count(total, "fault"), count(c.Calls, "AWS call"), count(c.Crashes, "key"))
	for _, k := range slices.Sorted(maps.Keys(c.Faults)) {
		var ops []string
		for _, op := range slices.Sorted(maps.Keys(c.ByOp)) {
			if n := c.ByOp[op][k]; n > 0 {
				ops = append(ops, fmt.Sprintf("%s %d", op, n))
			}
		}
		p("  %-19s %d (%s)", chaosKindName(k), c.Faults[k], strings.Join(ops, ", "))
	}
	p("  completion writes   %s had a fault injected into their COMPLETED write", count(c.CompletionFaults, "key"))
}

// chaosKindName says what a fault kind does, for the report.
func chaosKindName(k string) string {
	switch k {
	case faultproxy.FailBefore.String():
		return "500, not applied"
	case faultproxy.FailAfter.String():
		return "500 after applying"
	case faultproxy.ResetAfter.String():
		return "reset after applying"
	case faultproxy.Throttle.String():
		return "throttled"
	case faultproxy.Delayed.String():
		return "delayed"
	}
	return k
}

// pipelineConfig is the SDK configuration of the pipeline's calls to the
// server at endpoint: awsCfg pointed there, or with -chaos pointed at a
// fault proxy in front of it, drawing from its own stream of -seed. close
// stops the proxy.
func pipelineConfig(awsCfg aws.Config, endpoint string, opts Options, chaos *chaosLog, stream uint64) (aws.Config, func(), error) {
	cfg := awsCfg.Copy()
	cfg.BaseEndpoint = aws.String(endpoint)
	if chaos == nil {
		return cfg, func() {}, nil
	}
	proxy, err := startChaos(endpoint, opts.Chaos, opts.Seed, stream, chaos)
	if err != nil {
		return aws.Config{}, nil, err
	}
	cfg.BaseEndpoint = aws.String(proxy.URL)
	next := cfg.HTTPClient
	if next == nil {
		next = awshttp.NewBuildableClient()
	}
	cfg.HTTPClient = tagInvocation{next}
	return cfg, func() { _ = proxy.Close() }, nil
}
