//go:build integration

package templatetest

import (
	"strconv"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/internal/replay"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
)

// Worst-case arithmetic of one invocation's sends, for the template's bound
// on ReplayerBatchSize:
//
//   - calls: a batch of n records makes at most ceil(n/10) calls of ten,
//     plus one partial call per destination (2), plus the calls cut short by
//     the 1 MiB batch limit: Lambda's 6 MB invocation payload caps a batch's
//     bodies and attributes at 6 MB, and two consecutive byte-cut calls hold
//     more than 1 MiB between them, so at most 12 of those;
//   - rounds: the calls go replay.SendsInFlight at a time;
//   - callBudget: the time one SendMessageBatch may take. SQS usually
//     answers in tens of milliseconds; 2 s leaves room for a slow answer or
//     one retry of the SDK after a throttle;
//   - invocation margin: start-up, the decisions and the logs, and returning
//     the response before the timeout.
const (
	callBudget       = 2 * time.Second
	invocationMargin = 5 * time.Second
)

func worstCaseSendTime(n int) time.Duration {
	calls := (n+sqsmsg.MaxBatchEntries-1)/sqsmsg.MaxBatchEntries + 2 + 12
	rounds := (calls + replay.SendsInFlight - 1) / replay.SendsInFlight
	return time.Duration(rounds) * callBudget
}

// The template's largest ReplayerBatchSize can be sent within the
// replayer's timeout by the arithmetic above; a bound that no longer fits
// (a shorter timeout, fewer sends in flight, a larger maximum) fails here.
func TestTemplateBatchSizeFitsTheTimeout(t *testing.T) {
	t.Parallel()
	tmpl := translatedTemplate(t)
	var most float64
	for _, p := range tmpl.Parameters() {
		if p.Name == "ReplayerBatchSize" && p.MaxValue != nil {
			most = *p.MaxValue
		}
	}
	if most == 0 {
		t.Fatal("ReplayerBatchSize has no MaxValue: nothing bounds the batch against the timeout")
	}
	// The largest batch must also pass the template's rules (with the
	// batching window they ask for above 10).
	if _, err := tmpl.ParameterValues(map[string]string{"ReplayerBatchSize": strconv.Itoa(int(most)), "ReplayerBatchingWindow": "1"}); err != nil {
		t.Fatalf("the largest ReplayerBatchSize is refused: %v", err)
	}
	fn := tmpl.Resources()["DlqReplayerFunction"].Properties
	timeout, ok := fn["Timeout"].(float64)
	if !ok {
		t.Fatalf("DlqReplayerFunction's Timeout %v is not a number", fn["Timeout"])
	}
	budget := time.Duration(timeout)*time.Second - invocationMargin
	if need := worstCaseSendTime(int(most)); need > budget {
		t.Errorf("ReplayerBatchSize up to %v: %v of sends at worst (%v per call, %d in flight), over the %v the %v s timeout leaves",
			most, need, callBudget, replay.SendsInFlight, budget, timeout)
	}
}
