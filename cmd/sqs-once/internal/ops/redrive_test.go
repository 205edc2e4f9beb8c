//go:build integration

package ops_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/internal/ops"
	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
)

// checkMoved checks that got (received from the main queue) holds exactly
// one message per entry of want, body and attributes byte for byte, less
// the replay counter.
func checkMoved(t *testing.T, want []sqsmsg.Entry, got []sqstypes.Message) {
	t.Helper()
	byOriginal := map[string][]sqstypes.Message{}
	for _, m := range got {
		id := aws.ToString(m.MessageAttributes[sqsmsg.AttrOriginalMessageID].StringValue)
		byOriginal[id] = append(byOriginal[id], m)
	}
	if len(got) != len(want) {
		t.Errorf("main queue holds %d messages, want %d", len(got), len(want))
	}
	for _, w := range want {
		id := aws.ToString(w.Attributes[sqsmsg.AttrOriginalMessageID].StringValue)
		ms := byOriginal[id]
		if len(ms) != 1 {
			t.Errorf("%s reached the main queue %d times, want once", id, len(ms))
			continue
		}
		m := ms[0]
		if aws.ToString(m.Body) != w.Body {
			t.Errorf("%s: body %q, want %q", id, aws.ToString(m.Body), w.Body)
		}
		if _, ok := m.MessageAttributes[sqsmsg.AttrReplayCount]; ok {
			t.Errorf("%s: the replay counter was not reset", id)
		}
		if len(m.MessageAttributes) != len(w.Attributes)-1 {
			t.Errorf("%s: %d attributes, want %d", id, len(m.MessageAttributes), len(w.Attributes)-1)
		}
		for name, a := range w.Attributes {
			if name == sqsmsg.AttrReplayCount {
				continue
			}
			g := m.MessageAttributes[name]
			if aws.ToString(g.DataType) != aws.ToString(a.DataType) || aws.ToString(g.StringValue) != aws.ToString(a.StringValue) || !bytes.Equal(g.BinaryValue, a.BinaryValue) {
				t.Errorf("%s: attribute %s = %s %q %x, want %s %q %x", id, name,
					aws.ToString(g.DataType), aws.ToString(g.StringValue), g.BinaryValue, aws.ToString(a.DataType), aws.ToString(a.StringValue), a.BinaryValue)
			}
		}
	}
}

func summary(t *testing.T, r result) ops.RedriveSummary {
	t.Helper()
	var s ops.RedriveSummary
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("redrive --json: %v in %q", err, r.stdout)
	}
	return s
}

func messages(n int, reason func(i int) string) []sqsmsg.Entry {
	var out []sqsmsg.Entry
	for i := range n {
		out = append(out, operatorMessage(i, reason(i)))
	}
	return out
}

func maxAttempts(int) string { return "max-attempts" }

func TestRedriveDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	st, cfg, main, operator := queueTest(t)
	want := messages(12, maxAttempts)
	send(t, cfg, operator, want...)

	r := run(t, runOpts{}, "redrive", "--stack", st.Name, "--from", "operator", "--to", "main", "--dry-run", "--json")
	s := summary(t, r)
	if r.code != ops.ExitOK || !s.DryRun || s.Moved != 12 || s.Failed != 0 {
		t.Errorf("dry run: exit %d, %+v; want 12 that would move", r.code, s)
	}
	if strings.Contains(r.stderr, "[y/N]") {
		t.Errorf("a dry run asked for confirmation")
	}
	if v, f := depth(t, cfg, main); v+f != 0 {
		t.Errorf("a dry run sent %d messages to the main queue", v+f)
	}
	if v, f := depth(t, cfg, operator); v != 12 || f != 0 {
		t.Errorf("after a dry run the operator queue has %d visible, %d in flight; want all 12 visible", v, f)
	}
	got := drain(t, cfg, operator)
	for _, m := range got {
		if aws.ToString(m.MessageAttributes[sqsmsg.AttrReplayCount].StringValue) != "3" {
			t.Errorf("a dry run changed a message: %v", m.MessageAttributes)
		}
	}
	if len(got) != 12 {
		t.Errorf("operator queue gave back %d messages", len(got))
	}
}

func TestRedriveFilteredByReason(t *testing.T) {
	t.Parallel()
	st, cfg, main, operator := queueTest(t)
	all := messages(15, func(i int) string {
		if i%3 == 0 {
			return "permanent-error"
		}
		return "max-attempts"
	})
	send(t, cfg, operator, all...)
	var want []sqsmsg.Entry
	for _, e := range all {
		if aws.ToString(e.Attributes[sqsmsg.AttrReason].StringValue) == "max-attempts" {
			want = append(want, e)
		}
	}

	// Not confirmed: nothing moves.
	r := run(t, runOpts{stdin: "n\n"}, "redrive", "--stack", st.Name, "--from", "operator", "--to", "main", "--reason", "max-attempts")
	if r.code != ops.ExitRefused || !strings.Contains(r.stderr, "Move all messages from operator (about 15 visible) to main, resetting sqs-dlq-replay-nb, only reason max-attempts? [y/N]") {
		t.Fatalf("redrive answered n: exit %d", r.code)
	}
	if v, _ := depth(t, cfg, main); v != 0 {
		t.Fatalf("an unconfirmed redrive moved %d", v)
	}

	r = run(t, runOpts{stdin: "y\n"}, "redrive", "--stack", st.Name, "--from", "operator", "--to", "main", "--reason", "max-attempts")
	if r.code != ops.ExitOK {
		t.Fatalf("redrive --reason: exit %d", r.code)
	}
	for _, line := range []string{"redrive operator -> main: done", "moved 10", "skipped 5 (reason is not max-attempts: left in operator)", "failed 0"} {
		if !strings.Contains(words(r.stdout), line) {
			t.Errorf("summary does not say %q", line)
		}
	}
	checkMoved(t, want, drain(t, cfg, main))
	// The others are where they were, visible at once.
	if v, f := depth(t, cfg, operator); v != 5 || f != 0 {
		t.Errorf("operator queue: %d visible, %d in flight; want the 5 permanent-error ones visible", v, f)
	}
	for _, m := range drain(t, cfg, operator) {
		if r := aws.ToString(m.MessageAttributes[sqsmsg.AttrReason].StringValue); r != "permanent-error" {
			t.Errorf("left in the operator queue: reason %s", r)
		}
	}
}

func TestRedriveInterruptedAndRerun(t *testing.T) {
	t.Parallel()
	st, cfg, main, operator := queueTest(t)
	want := messages(35, maxAttempts)
	send(t, cfg, operator, want...)

	// The interrupt (what Ctrl-C does to the CLI's context) arrives while
	// the first send to the main queue is on the wire, held by the proxy.
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	proxy, viaProxy := proxied(t, faultproxy.WithObserver(func(op string, _ []byte, _ http.Header, _ faultproxy.Fault) {
		if op == "SendMessageBatch" {
			interrupt()
		}
	}))
	proxy.Script("SendMessageBatch", faultproxy.Delay(200*time.Millisecond))

	r := run(t, runOpts{cfg: &viaProxy, ctx: ctx}, "redrive", "--stack", st.Name, "--from", "operator", "--to", "main", "--yes", "--json")
	first := summary(t, r)
	if r.code != ops.ExitIncomplete || !first.Interrupted || first.Moved == 0 || first.Moved >= len(want) || first.Failed != 0 {
		t.Fatalf("interrupted redrive: exit %d, %+v; want interrupted after its first batch", r.code, first)
	}
	if !strings.Contains(r.stderr, "interrupted: finishing the batch in flight") {
		t.Errorf("the interrupt was not acknowledged on stderr")
	}
	// The batch in flight was finished: what reached main left operator.
	if v, f := depth(t, cfg, main); v != first.Moved || f != 0 {
		t.Errorf("after the interrupt main holds %d (+%d in flight), summary says %d moved", v, f, first.Moved)
	}
	if v, f := depth(t, cfg, operator); v != len(want)-first.Moved || f != 0 {
		t.Errorf("after the interrupt operator holds %d visible, %d in flight; want %d visible", v, f, len(want)-first.Moved)
	}

	r = run(t, runOpts{}, "redrive", "--stack", st.Name, "--from", "operator", "--to", "main", "--yes", "--json")
	second := summary(t, r)
	if r.code != ops.ExitOK || second.Moved != len(want)-first.Moved || second.Interrupted {
		t.Fatalf("re-run: exit %d, %+v; want the other %d moved", r.code, second, len(want)-first.Moved)
	}
	checkMoved(t, want, drain(t, cfg, main))
	if v, f := depth(t, cfg, operator); v+f != 0 {
		t.Errorf("operator queue still holds %d", v+f)
	}
}

func TestRedriveMovesCopiesOnce(t *testing.T) {
	t.Parallel()
	emptyQueues(t)
	st := stack(t)
	cfg := mototest.Config(t)
	main, operator, dlq := output(t, "MainQueueUrl"), output(t, "OperatorQueueUrl"), output(t, "DeadLetterQueueUrl")
	proxy, viaProxy := proxied(t)
	// A forward applied by SQS, its answer lost: the SDK sends it again,
	// and the operator queue holds two copies of one original message.
	copied := operatorMessage(1, "max-attempts")
	proxy.Script("SendMessageBatch", faultproxy.FailAfter)
	send(t, viaProxy, operator, copied)
	want := messages(12, maxAttempts)[2:]
	send(t, cfg, operator, want...)
	if v, _ := depth(t, cfg, operator); v != len(want)+2 {
		t.Fatalf("the lost answer did not make a copy: operator holds %d, want %d", v, len(want)+2)
	}
	keep := mototest.NewQueue(t, cfg, false, nil)
	if r := run(t, runOpts{}, "redrive", "--stack", st.Name, "--from", "operator", "--keep-copy", "dlq", "--yes"); r.code != ops.ExitUsage {
		t.Errorf("--keep-copy dlq (the replayer would replay the copies): exit %d, want %d", r.code, ops.ExitUsage)
	}

	r := run(t, runOpts{}, "redrive", "--stack", st.Name, "--from", "operator", "--to", "main", "--keep-copy", keep, "--yes", "--json")
	s := summary(t, r)
	if r.code != ops.ExitOK || s.Moved != len(want)+1 || s.Copies != 1 {
		t.Fatalf("redrive: exit %d, %+v; want %d moved and 1 copy", r.code, s, len(want)+1)
	}
	checkMoved(t, append([]sqsmsg.Entry{copied}, want...), drain(t, cfg, main))
	// The keep-copy queue has each moved message unchanged, counter included.
	kept := drain(t, cfg, keep)
	var ids []string
	for _, m := range kept {
		if aws.ToString(m.MessageAttributes[sqsmsg.AttrReplayCount].StringValue) != "3" {
			t.Errorf("the kept copy was changed: %v", m.MessageAttributes)
		}
		ids = append(ids, aws.ToString(m.MessageAttributes[sqsmsg.AttrOriginalMessageID].StringValue))
	}
	slices.Sort(ids)
	if len(ids) != len(want)+1 || slices.Compact(slices.Clone(ids)) == nil || len(slices.Compact(ids)) != len(want)+1 {
		t.Errorf("keep-copy queue holds %v, want one copy of each moved message", ids)
	}
	if v, f := depth(t, cfg, operator); v+f != 0 {
		t.Errorf("operator queue still holds %d", v+f)
	}

	// From the DLQ, with a limit: a dead letter has no reason, and --max
	// leaves the rest where it was.
	dead := messages(6, func(int) string { return "" })
	for i := range dead {
		delete(dead[i].Attributes, sqsmsg.AttrReason)
	}
	send(t, cfg, dlq, dead...)
	r = run(t, runOpts{}, "redrive", "--stack", st.Name, "--from", "dlq", "--max", "4", "--yes", "--json")
	if s := summary(t, r); r.code != ops.ExitOK || s.Moved != 4 {
		t.Fatalf("redrive --from dlq --max 4: exit %d, %+v", r.code, s)
	}
	if v, f := depth(t, cfg, dlq); v != 2 || f != 0 {
		t.Errorf("dlq after --max 4: %d visible, %d in flight; want 2 visible", v, f)
	}
	if got := drain(t, cfg, main); len(got) != 4 {
		t.Errorf("main received %d from the dlq, want 4", len(got))
	}
}

func TestRedriveSendFailureKeepsTheMessage(t *testing.T) {
	t.Parallel()
	st, cfg, main, operator := queueTest(t)
	send(t, cfg, operator, messages(3, maxAttempts)...)
	proxy, viaProxy := proxied(t)
	// Every attempt of the send refused before SQS applies it.
	proxy.Script("SendMessageBatch", slices.Repeat([]faultproxy.Fault{faultproxy.FailBefore}, sdkAttempts)...)
	r := run(t, runOpts{cfg: &viaProxy}, "redrive", "--stack", st.Name, "--from", "operator", "--yes")
	if r.code != ops.ExitIncomplete || !strings.Contains(words(r.stdout), "failed 3") || !strings.Contains(r.stdout, "send: ") {
		t.Errorf("redrive with the main queue failing: exit %d, want %d and the failures listed", r.code, ops.ExitIncomplete)
	}
	if v, _ := depth(t, cfg, main); v != 0 {
		t.Errorf("main received %d", v)
	}
	if v, f := depth(t, cfg, operator); v != 3 || f != 0 {
		t.Errorf("operator: %d visible, %d in flight; want the 3 failed ones visible again", v, f)
	}

	// The window README's "Operations" names: the main queue accepted the
	// messages, and every attempt to delete them from the source failed.
	// They are in both queues, and the summary says so, message by message.
	drain(t, cfg, operator)
	send(t, cfg, operator, messages(2, maxAttempts)...)
	if proxy.Pending() != 0 {
		t.Fatalf("%d faults were not used", proxy.Pending())
	}
	proxy.Script("DeleteMessageBatch", slices.Repeat([]faultproxy.Fault{faultproxy.FailBefore}, sdkAttempts)...)
	r = run(t, runOpts{cfg: &viaProxy}, "redrive", "--stack", st.Name, "--from", "operator", "--yes")
	text := words(r.stdout)
	if r.code != ops.ExitIncomplete || !strings.Contains(text, "moved 2") || !strings.Contains(text, "not deleted 2 (in main and still in operator)") ||
		strings.Count(r.stdout, "delete: in the destination, but still in the source") != 2 {
		t.Errorf("redrive whose deletes fail: exit %d, want %d and both messages listed as not deleted", r.code, ops.ExitIncomplete)
	}
	if v, _ := depth(t, cfg, main); v != 2 || proxy.Pending() != 0 {
		t.Errorf("main holds %d, want the 2 sent (%d faults unused)", v, proxy.Pending())
	}
	if v, f := depth(t, cfg, operator); v+f != 2 {
		t.Errorf("operator holds %d, want the 2 it could not delete", v+f)
	}
}

// sdkAttempts is how many times the SDK's standard retryer tries a call.
const sdkAttempts = 3

// proxied is a fault proxy in front of the package's moto_server, closed at
// the end of the test, and a configuration whose clients go through it.
func proxied(t *testing.T, opts ...faultproxy.Option) (*faultproxy.Proxy, aws.Config) {
	t.Helper()
	proxy, err := faultproxy.Start(mototest.URL(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	cfg := mototest.Config(t).Copy()
	cfg.BaseEndpoint = aws.String(proxy.URL)
	// The SDK's standard retryer, attempts and all, without its waits: a
	// test scripts sdkAttempts faults to fail a call for good.
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = sdkAttempts
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		})
	}
	return proxy, cfg
}

func TestRedriveFIFO(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	// Queues given by flag, no stack: a FIFO operator queue and main queue.
	src, dst := mototest.NewQueue(t, cfg, true, nil), mototest.NewQueue(t, cfg, true, nil)
	var sent []sqsmsg.Entry
	for i, group := range []string{"g1", "g1", "g2", "g2"} {
		e := operatorMessage(i, "permanent-error")
		e.GroupID, e.DeduplicationID = group, fmt.Sprint("d", i)
		sent = append(sent, e)
	}
	send(t, cfg, src, sent...)
	flags := []string{"redrive", "--operator-queue", src, "--main-queue", dst, "--from", "operator", "--to", "main", "--yes"}

	// The main queue accepts the messages; every delete from the source
	// fails. A re-run sends them again, and the FIFO main queue drops the
	// second sends: their deduplication id is the source message's.
	proxy, viaProxy := proxied(t)
	proxy.Script("DeleteMessageBatch", slices.Repeat([]faultproxy.Fault{faultproxy.FailBefore}, sdkAttempts)...)
	if r := run(t, runOpts{cfg: &viaProxy}, flags...); r.code != ops.ExitIncomplete || !strings.Contains(words(r.stdout), "not deleted 4") {
		t.Fatalf("redrive with failing deletes: exit %d", r.code)
	}
	if r := run(t, runOpts{}, flags...); r.code != ops.ExitOK || !strings.Contains(words(r.stdout), "moved 4") {
		t.Fatalf("re-run: exit %d", r.code)
	}
	got := mototest.Receive(t, cfg, dst, 8, 2*time.Second)
	if len(got) != len(sent) {
		t.Fatalf("the FIFO main queue holds %d messages, want %d (re-sends deduplicated)", len(got), len(sent))
	}
	groups := map[string][]string{}
	for _, m := range got {
		g := m.Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)]
		groups[g] = append(groups[g], aws.ToString(m.MessageAttributes[sqsmsg.AttrOriginalMessageID].StringValue))
	}
	if fmt.Sprint(groups) != "map[g1:[original-000 original-001] g2:[original-002 original-003]]" {
		t.Errorf("groups and order in the main queue: %v", groups)
	}
	if v, f := depth(t, cfg, src); v+f != 0 {
		t.Errorf("the source holds %d", v+f)
	}
}
