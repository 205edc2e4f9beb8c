//go:build integration

package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/samstack"
	"github.com/sqs-once/sqs-once/internal/local/localesm"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/replay"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

func TestMain(m *testing.M) { mototest.Main(m) }

// The demo tests run side by side (t.Parallel), as many at a time as go
// test's -parallel allows (GOMAXPROCS: 2 on a 2-core machine), each with a
// stack of its own on the package's moto_server (every run has a random
// name). Most of a demo test's time is waiting, not work: a crashed
// invocation's function timeout, a lock's expiry, the failure backoffs and
// replay delays, -wait; one after another, the package took 222 s idle.

// baseFlags run the demo on the test's moto_server with the repository's
// template.
func baseFlags(t *testing.T, extra ...string) []string {
	return append([]string{"-endpoint", mototest.URL(t), "-template", "../../template.yaml", "-out", t.TempDir(), "-json"}, extra...)
}

// fastFlags also shorten the DLQ path (3 receives, 1 replay) so a test run
// takes seconds; the pipeline is the same.
func fastFlags(t *testing.T, extra ...string) []string {
	return baseFlags(t, append([]string{"-max-receive-count", "3", "-max-attempts", "1"}, extra...)...)
}

func runMain(t *testing.T, args []string) (Summary, int, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), args, &stdout, &stderr)
	var s Summary
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatalf("exit %d; stdout is not the JSON summary: %v\nstdout: %s\nstderr: %s", code, err, stdout.String(), stderr.String())
	}
	return s, code, stderr.String()
}

// TestDemoInvariants runs the whole pipeline with a small workload and checks
// the invariants from the machine-readable summary.
func TestDemoInvariants(t *testing.T) {
	t.Parallel()
	s, code, report := runMain(t, fastFlags(t, "-n", "80", "-dup", "0.3", "-poison", "2", "-transient", "2", "-permanent", "1", "-seed", "5"))
	if code != ExitOK || !s.OK {
		t.Fatalf("exit %d, violations %v\n%s", code, s.Violations, report)
	}
	wl := s.Workload
	if s.Lost != 0 || s.UniqueKeys != 80 || s.Sent != 80+wl.ExtraCopies || wl.ExtraCopies == 0 {
		t.Errorf("lost %d, keys %d, sent %d, extra copies %d", s.Lost, s.UniqueKeys, s.Sent, wl.ExtraCopies)
	}
	// Every processable key exactly once; the poison and permanent keys never.
	// A second side effect is allowed only inside the documented window, and
	// no side effect only when every copy ran out of this test's small retry
	// budget: both happen when a loaded machine makes invocations time out,
	// and the run is OK only if each is explained so.
	se := s.SideEffects
	if se.ExactlyOnce+se.InWindow+se.Exhausted != 77 || se.None != 3 || se.Multiple != se.InWindow {
		t.Errorf("side effects %+v, want 77 keys once (or inside the window, or out of retries) and 3 none", se)
	}
	// Every message sent ends one way or more (a forward can arrive twice at
	// the operator queue); none is lost.
	if s.Processed+s.DuplicatesSuppressed+s.Operator.Total < s.Sent || s.Processed < 77-se.Exhausted {
		t.Errorf("processed %d + suppressed %d + at operator %d < sent %d (or fewer than %d processed)",
			s.Processed, s.DuplicatesSuppressed, s.Operator.Total, s.Sent, 77-se.Exhausted)
	}
	if s.Operator.ByReason["max-attempts"] < 2 || s.Operator.ByReason["permanent-error"] < 1 {
		t.Errorf("operator %+v, want the 2 poison keys (max-attempts) and the permanent one", s.Operator)
	}
	// With maxReceiveCount 3, the poison keys and the transient key that fails
	// 3 times go through the DLQ (the other fails twice and succeeds on its
	// third receive); with MaxAttempts 1 each is replayed once, and the
	// transient one succeeds on its replay. A timeout on a loaded machine can
	// send more messages through the DLQ, never fewer.
	if s.Replays.Total < 3 || len(s.Replays.ByAttempt) != 1 || s.Replays.ByAttempt[0].CeilingSeconds != 2 ||
		(se.Exhausted == 0 && s.Replays.Rescued < 1) {
		t.Errorf("replays %+v, want at least 3, all first replays with a 2 s ceiling, one rescued", s.Replays)
	}
	for _, d := range s.Replays.ByAttempt[0].Delays {
		if d < 0 || d > 2 {
			t.Errorf("replay delay %d s outside [0, ceiling 2 s]", d)
		}
	}
	if s.Timings.MaxReceiveCount != 3 || s.Timings.MaxAttempts != 1 || s.Timings.VisibilityTimeoutSeconds != 10 || s.Timings.FunctionTimeoutSeconds != 10 {
		t.Errorf("timings %+v do not reflect the flags and the demo's 10 s function timeout", s.Timings)
	}
	// Each side effect is a record the processor reported processed.
	if r := s.Records; r.Processed+r.Unrecorded != s.SideEffects.Total || s.Invocations.Total == 0 || s.Invocations.TimedOut != 0 {
		t.Errorf("records %+v, invocations %+v, %d side effects", r, s.Invocations, s.SideEffects.Total)
	}
	// Notes are allowed only for the two load-dependent outcomes above.
	for _, n := range s.Unexpected {
		if !strings.Contains(n, "ran out of retries") && !strings.Contains(n, "reached the operator queue") {
			t.Errorf("unexpected note %q", n)
		}
	}
	for _, want := range []string{"lost                  0  [ok]", "verdict: OK"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	entries, err := ReadLedger(s.Ledger)
	if err != nil || len(entries) != s.SideEffects.Total || len(entries) < 77 {
		t.Errorf("ledger file %s: %d entries, %v", s.Ledger, len(entries), err)
	}
}

// TestDemoCrashIsReportedAsTheDocumentedWindow makes two invocations hang
// after their side effect until the function timeout: nothing deleted, no
// completion, no release. The lock expires, the redelivery runs the handler
// again, and the report names that window, caused by the injected crash,
// instead of failing or hiding it. It keeps the template's retry budget:
// the redeliveries must outlast the lock, or the message ends at the
// operator queue instead (see the README).
func TestDemoCrashIsReportedAsTheDocumentedWindow(t *testing.T) {
	t.Parallel()
	s, code, report := runMain(t, baseFlags(t, "-n", "30", "-poison", "0", "-transient", "0", "-permanent", "0", "-crash", "2", "-function-timeout", "10s"))
	if code != ExitOK || !s.OK {
		t.Fatalf("exit %d, violations %v\n%s", code, s.Violations, report)
	}
	if se := s.SideEffects; se.Multiple != 2 || se.InWindow != 2 || se.ExactlyOnce != 28 || s.Lost != 0 {
		t.Errorf("side effects %+v, lost %d", s.SideEffects, s.Lost)
	}
	if iv := s.Invocations; iv.TimedOutCrash < 1 || iv.TimedOut != iv.TimedOutCrash || len(s.Unexpected) != 0 {
		t.Fatalf("invocations %+v, notes %v", iv, s.Unexpected)
	}
	for _, k := range s.Window.Keys {
		if !k.Injected || k.SideEffects != 2 || len(k.Causes) != 1 || !strings.Contains(k.Causes[0].Cause, "crash injected") {
			t.Errorf("window key %+v: want 2 side effects, the first from the crashed invocation", k)
		}
	}
	// A crashed message comes back after the 10 s visibility timeout, while
	// its dead holder's lock lives until the invocation's deadline plus the
	// margin: the processor refuses it once and hides it until the lock can
	// be taken over (counted from its InProgressHidden metric), so it never
	// uses up its 3 receives and goes through the DLQ.
	if h := s.HealthyDeadLettered; h == nil || h.Count != 0 || s.Records.InProgressHidden < 1 || s.Records.InProgressHidden > s.Records.InProgress {
		t.Errorf("healthy dead-lettered %+v, records %+v: want none dead-lettered, and the refused crashed messages hidden", h, s.Records)
	}
	for _, want := range []string{"keys had a second side effect", "crash injected", "docs/guarantees.md, limit 1", "2 were caused by a fault the demo", "verdict: OK",
		"healthy             0 of them of keys whose handler succeeds"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

// TestDemoTxCrashCommitsOnce is the crash run above with -tx: each crash
// key's first invocation stages its side effect and hangs before the
// commit, so nothing of it is applied, and the retry commits the effect
// once. The business table, which the report reads, holds one item per
// key: more than once 0, where the plain run has 2.
//
// The crash runs use the demo's own function timeout, 10 s: with 5 s a
// healthy invocation on a busy machine (the whole suite's packages side by
// side) timed out too, which the verdict rightly counts as a failure.
func TestDemoTxCrashCommitsOnce(t *testing.T) {
	t.Parallel()
	s, code, report := runMain(t, baseFlags(t, "-n", "30", "-poison", "0", "-transient", "0", "-permanent", "0", "-crash", "2", "-function-timeout", "10s", "-tx"))
	if code != ExitOK || !s.OK {
		t.Fatalf("exit %d, violations %v\n%s", code, s.Violations, report)
	}
	if se := s.SideEffects; se.Multiple != 0 || se.ExactlyOnce != 30 || se.Total != 30 || s.Lost != 0 || len(s.Window.Keys) != 0 {
		t.Errorf("side effects %+v, window %+v, lost %d", s.SideEffects, s.Window.Keys, s.Lost)
	}
	// Each of the 30 keys committed once (above); the 2 crashed
	// invocations' staged effects never were. On a loaded machine an
	// invocation the demo did not crash may also pass its function timeout
	// after staging: its effect is not committed either and the key's
	// redelivery commits it, one more staged and uncommitted effect that
	// is no failure, so those are counted, not fixed at 2.
	tx := s.Transactional
	if tx == nil {
		t.Fatal("no transactional counts in the summary")
	}
	iv := s.Invocations
	slow := iv.TimedOut - iv.TimedOutCrash - iv.TimedOutChaos
	if tx.CrashedUncommitted != 2 || tx.Uncommitted < 2 || tx.Staged != 30+tx.Uncommitted {
		t.Errorf("transactional %+v: want 30 committed of %d staged, the 2 crashed ones never committed", tx, 30+tx.Uncommitted)
	}
	if extra := tx.Uncommitted - tx.CrashedUncommitted; extra > 0 {
		t.Logf("%d staged effects of invocations the demo did not crash were not committed (%d invocations passed the function timeout without a crash): the machine is loaded", extra, slow)
	}
	if iv.TimedOutCrash < 1 || slow < 0 || len(s.Unexpected) != 0 {
		t.Errorf("invocations %+v, notes %v", iv, s.Unexpected)
	}
	for _, want := range []string{"  more than once      0 keys  [ok]", "committed in the business table", fmt.Sprintf("%d never committed, 2 of them by an invocation the demo crashed before its commit", tx.Uncommitted),
		"duplicate window      not hit", "verdict: OK"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

// TestDemoCountsWhereItHappens runs a workload with a known number of
// re-sent copies and no failure: every copy is a record the lock answers
// "duplicate", every key one processed record, and the last progress line
// and the report show those counts, taken from the processor's decisions.
func TestDemoCountsWhereItHappens(t *testing.T) {
	t.Parallel()
	s, code, report := runMain(t, baseFlags(t, "-n", "40", "-dup", "0.5", "-poison", "0", "-transient", "0", "-permanent", "0", "-seed", "7"))
	if code != ExitOK || !s.OK {
		t.Fatalf("exit %d, violations %v\n%s", code, s.Violations, report)
	}
	extra := s.Workload.ExtraCopies
	if extra < 15 {
		t.Fatalf("only %d re-sent copies; the test needs a workload with many", extra)
	}
	// Every copy is answered "duplicate" once; a message delivered again (its
	// delete failed on a loaded machine) is answered again, and counted, as
	// is every record the event source mapping delivered.
	r := s.Records
	if r.Processed != 40 || r.Unrecorded != 0 || r.Duplicate < extra || s.DuplicatesSuppressed != r.Duplicate || s.Processed != 40 {
		t.Errorf("records %+v, processed %d, suppressed %d; want 40 processed and at least %d duplicates", r, s.Processed, s.DuplicatesSuppressed, extra)
	}
	if r.Total() != s.Deliveries || r.Failed != 0 || r.TimedOut != 0 || r.NoAnswer != 0 || len(r.Other) != 0 {
		t.Errorf("records %+v add up to %d, %d delivered: every delivered record has one answer, none failed", r, r.Total(), s.Deliveries)
	}
	extra = r.Duplicate
	lines := strings.Split(strings.TrimSpace(report), "\n")
	var last string
	for _, l := range lines {
		if strings.HasPrefix(l, "[") {
			last = l
		}
	}
	// The last line is printed after the pipeline stopped, from the
	// report's counts: exactly the summary's.
	want := fmt.Sprintf("%d/%d messages done · 40 processed · %d duplicates suppressed · 0 dead-lettered · 0 replays · 0 at operator", s.Sent, s.Sent, extra)
	if !strings.Contains(last, want) || last != s.Progress().Line() {
		t.Errorf("last progress line %q, want %q, the summary's %q", last, want, s.Progress().Line())
	}
	if !strings.Contains(report, fmt.Sprintf("duplicate           %d answered \"duplicate\"", extra)) {
		t.Errorf("report lacks the duplicate count:\n%s", report)
	}
}

// TestDemoTooShortATimeoutFailsAndSaysWhy forces a function timeout below
// the reserve the processor keeps for a batch's last calls: no record can
// start, nothing is processed, and the run fails, naming the timings as the
// cause and the flag that gives more room. -wait counts from the first
// send: when it counted from the run's start, a busy machine spent the 15 s
// creating the stack, no message was sent, and the run failed for that
// reason instead.
func TestDemoTooShortATimeoutFailsAndSaysWhy(t *testing.T) {
	t.Parallel()
	s, code, report := runMain(t, baseFlags(t, "-n", "10", "-dup", "0", "-poison", "0", "-transient", "0", "-permanent", "0", "-function-timeout", "300ms", "-wait", "15s"))
	if code != ExitViolation || s.OK {
		t.Fatalf("exit %d, ok %v; want a failed run\n%s", code, s.OK, report)
	}
	if s.Records.NotStarted == 0 || s.Timings.FunctionTimeoutSeconds != 0.3 {
		t.Errorf("records %+v, timings %+v", s.Records, s.Timings)
	}
	for _, want := range []string{"function timeout 300ms", "records were not started because their invocation's time ran short",
		"This machine is slower than the demo's timings assume", "-function-timeout 15s", "verdict: FAILED"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

// TestDemoChaosHeavy runs the pipeline with -chaos heavy: faults in about
// one AWS call in six and three crashed keys. Nothing may be lost, and every
// duplicate side effect must be explained by a fault the demo injected.
// A fault on any call of an invocation (a delay, a failure the SDK waits
// out) spends the time of every key in it: an invocation that then runs
// out of time before a healthy key's completion is explained by -chaos,
// which the report knows because the processor's calls name their
// invocation to the proxy (TestCallsNameTheirInvocation); before, it tied
// faults only to the key of the faulted call, and a busy machine failed
// this test with such a duplicate "unexplained". What nothing injected
// still fails it. The function timeout is the demo's default, 10 s.
func TestDemoChaosHeavy(t *testing.T) {
	t.Parallel()
	s, code, report := runMain(t, fastFlags(t, "-n", "60", "-dup", "0.3", "-poison", "1", "-transient", "1", "-permanent", "1", "-chaos", "heavy", "-function-timeout", "10s", "-seed", "3"))
	if code != ExitOK || !s.OK || s.Lost != 0 {
		t.Fatalf("exit %d, lost %d, violations %v\n%s", code, s.Lost, s.Violations, report)
	}
	c := s.Chaos
	if c == nil || c.Level != "heavy" || c.Calls == 0 || c.Crashes != 3 {
		t.Fatalf("chaos %+v", c)
	}
	for _, kind := range []string{"FailBefore", "FailAfter", "ResetAfter", "Throttle", "Delay"} {
		if c.Faults[kind] == 0 {
			t.Errorf("no %s fault injected in %d calls: %+v", kind, c.Calls, c.Faults)
		}
	}
	if iv := s.Invocations; iv.TimedOutCrash < 1 || iv.TimedOut != iv.TimedOutCrash+iv.TimedOutChaos {
		t.Errorf("invocations %+v: want the crashes, and no timeout but theirs and those of invocations -chaos slowed", s.Invocations)
	}
	// Under -chaos a healthy message dead-lettered is a finding, stated in
	// the report, not a broken invariant (the run is OK above either way).
	if h := s.HealthyDeadLettered; h == nil || h.FailsRun || (h.Count > 0) != (h.Finding != "") || (h.Count > 0) != strings.Contains(report, "finding: ") {
		t.Errorf("healthy dead-lettered %+v: want it counted, a finding when not 0, never failing the run", h)
	}
	for _, k := range s.Window.Keys {
		if !k.Injected {
			t.Errorf("window key %+v not explained by an injected fault", k)
		}
	}
	for _, want := range []string{"chaos (heavy)", "500 after applying", "reset after applying", "verdict: OK"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

// TestDemoFailsWhenMessagesAreMissing: giving up before every message has
// reached an end fails the run with exit status 1 instead of reporting
// success. What has no end is accounted for as it is: never sent (a busy
// machine may not send them all within -wait 2s, counted from the first
// send), still queued, or lost.
func TestDemoFailsWhenMessagesAreMissing(t *testing.T) {
	t.Parallel()
	s, code, report := runMain(t, fastFlags(t, "-n", "20", "-poison", "2", "-wait", "2s"))
	left := 0
	for _, n := range s.LeftInQueues {
		left += n
	}
	if code != ExitViolation || s.OK || s.NotSent+left+s.Lost == 0 {
		t.Fatalf("exit %d, ok %v, not sent %d, left in queues %v, lost %d; want a failed run with messages without an end\n%s",
			code, s.OK, s.NotSent, s.LeftInQueues, s.Lost, report)
	}
	if !strings.Contains(report, "verdict: FAILED") || !strings.Contains(strings.Join(s.Violations, "\n"), "gave up after 2s") {
		t.Errorf("violations %v\n%s", s.Violations, report)
	}
}

// TestDemoTargetSQS runs `-target sqs` end to end at a small size: the
// processor, deployed with Target=sqs:<the demo's second queue>, runs no
// handler and forwards each key's message there once, body and attributes
// intact, with the re-sends suppressed; the report drains that queue and
// counts per key. A key may arrive twice only where the report explains it
// by a documented limit (an invocation abandoned at its 1 s timeout on a
// loaded machine, after the queue accepted its send): the run is OK only if
// every such copy is explained, and on an idle machine there is none.
func TestDemoTargetSQS(t *testing.T) {
	t.Parallel()
	s, code, report := runMain(t, baseFlags(t, "-target", "sqs", "-n", "30", "-dup", "0.5", "-seed", "7"))
	if code != ExitOK || !s.OK {
		t.Fatalf("exit %d, violations %v\n%s", code, s.Violations, report)
	}
	ts := s.Target
	if ts == nil {
		t.Fatalf("no target counts in the summary:\n%s", report)
	}
	wl := s.Workload
	if ts.KeysSent != 30 || ts.CopiesSent != s.Sent || s.Sent != 30+wl.ExtraCopies || wl.ExtraCopies == 0 ||
		wl.Poison+wl.Transient+wl.Permanent+wl.Crash != 0 {
		t.Errorf("workload %+v, target %+v: want 30 keys with re-sends and no failing keys", wl, ts)
	}
	if ts.ExactlyOnce+ts.Explained != 30 || ts.MoreThanOnce != ts.Explained || ts.NeverArrived != 0 || s.Lost != 0 {
		t.Errorf("target %+v, lost %d: want every key once (or twice, explained), none lost", ts, s.Lost)
	}
	if ts.Explained > 0 {
		t.Logf("%d keys arrived twice, each explained: %+v", ts.Explained, ts.Duplicates)
	}
	if ts.Arrived < 30 || ts.BodiesIntact != ts.Arrived || ts.AttributesIntact != ts.Arrived || len(ts.SentAttributes) != 4 {
		t.Errorf("target %+v: want every arrival intact", ts)
	}
	if s.Processed+s.DuplicatesSuppressed != s.Sent || s.DuplicatesSuppressed < wl.ExtraCopies-ts.Explained || s.Operator.Total != 0 || s.DeadLettered != 0 {
		t.Errorf("forwarded %d, suppressed %d, operator %d, dead-lettered %d, sent %d", s.Processed, s.DuplicatesSuppressed, s.Operator.Total, s.DeadLettered, s.Sent)
	}
	if !strings.HasPrefix(ts.Target, "sqs:https://sqs.") || !strings.HasSuffix(ts.Target, "-forwarded") || s.LeftInQueues["target"] != 0 {
		t.Errorf("target %q, left %v: want the demo's drained -forwarded queue", ts.Target, s.LeftInQueues)
	}
	for _, want := range []string{"never arrived       0 keys  [ok]", "lost                  0  [ok]", "verdict: OK: every key forwarded to the target queue exactly once"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

// TestStackMode deploys the stack, runs the real processor and replayer on it
// as its Lambdas would (behind local event source mappings configured from
// the stack's own mappings, with the shipped kind of business handler: log
// and succeed), and checks it with -stack, which finds everything from the
// stack's outputs and functions. Another producer's message waits in the
// operator queue: the run must count it and leave it there.
func TestStackMode(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	awsCfg := mototest.Config(t)
	opts, err := ParseFlags(fastFlags(t), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	api := sqs.NewFromConfig(awsCfg)
	prepared, err := samstack.Prepare(ctx, awsCfg.Region, mototest.Name("sqs-once-stack"), opts.Template, demoParameters(opts))
	if err != nil {
		t.Fatal(err)
	}
	info, err := deployLocal(ctx, awsCfg, api, opts, prepared)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(info.opURL), MessageBody: aws.String(`{"from":"another producer"}`)}); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	handled := map[string]int{}
	business := func(_ context.Context, msg events.SQSMessage) error {
		b, err := ParseBody(msg.Body)
		if err != nil {
			return err
		}
		mu.Lock()
		handled[b.OrderID]++
		mu.Unlock()
		return nil
	}
	quiet := slog.New(slog.DiscardHandler)
	procCfg := info.processorCfg
	procCfg.Store = dynamostore.New(serializeWrites(dynamodb.NewFromConfig(awsCfg)), info.table)
	procCfg.AWS, procCfg.Logger = awsCfg, quiet
	procH, err := sqsonce.NewConsumer(procCfg, business)
	if err != nil {
		t.Fatal(err)
	}
	repH := replay.NewHandler(info.replayCfg, awsCfg)
	procESM := esmConfig(info.processor, info.processorESM, info.mainURL, 2)
	repESM := esmConfig(info.replayer, info.replayerESM, info.dlqURL, 2)
	if !procESM.ReportBatchItemFailures || !repESM.ReportBatchItemFailures || procESM.Timeout != demoFunctionTimeout {
		t.Fatalf("mappings not taken from the stack: %+v %+v", procESM, repESM)
	}
	var wg sync.WaitGroup
	for _, m := range []struct {
		cfg localesm.Config
		h   localesm.Handler
	}{{procESM, procH.Handle}, {repESM, repH.Handle}} {
		m.cfg.Logger = quiet
		esm, err := localesm.New(api, m.cfg, m.h)
		if err != nil {
			t.Fatal(err)
		}
		if err := esm.Check(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = esm.Run(ctx) })
	}
	defer wg.Wait()
	defer cancel()

	s, code, report := runMain(t, []string{"-stack", info.name, "-endpoint", mototest.URL(t), "-n", "40", "-poison", "2", "-json"})
	if code != ExitOK || !s.OK {
		t.Fatalf("exit %d, violations %v\n%s", code, s.Violations, report)
	}
	if s.Mode != "stack" || s.Lost != 0 || s.Processed != 40-2 || s.Operator.ByReason["max-attempts"] != 2 || s.Operator.Total != 2 {
		t.Errorf("mode %s lost %d completed keys %d operator %+v", s.Mode, s.Lost, s.Processed, s.Operator)
	}
	// The completed records the run read are the handler's own work: every
	// processable key ran, the poison ones (sent without orderId) never did.
	mu.Lock()
	if len(handled) != 40-2 || handled[""] != 0 {
		t.Errorf("business handler ran for %d keys (%v), want the 38 processable ones", len(handled), handled)
	}
	mu.Unlock()
	if s.Workload.Transient != 0 || s.Workload.Permanent != 0 {
		t.Errorf("stack workload %+v: transient and permanent keys need the demo's handler", s.Workload)
	}
	if len(s.NotChecked) == 0 || !strings.Contains(report, "not checked") {
		t.Errorf("the report must say what -stack cannot check:\n%s", report)
	}
	if n, err := queueDepth(ctx, api, info.opURL); s.Foreign != 1 || err != nil || n != 1 {
		t.Errorf("other producer's message: counted %d, operator queue holds %d (%v); want it counted once and left there", s.Foreign, n, err)
	}
}

// BenchmarkDemoDefaults measures what `make demo` does after start-up: the
// default workload through the whole pipeline (the README's timing claim).
// Run it with: go -C local test -tags integration -run '^$' -bench DemoDefaults -benchtime 1x ./demo
func BenchmarkDemoDefaults(b *testing.B) {
	for b.Loop() {
		var stdout, stderr bytes.Buffer
		args := []string{"-endpoint", mototest.URL(b), "-template", "../../template.yaml", "-out", b.TempDir(), "-json"}
		if code := Main(context.Background(), args, &stdout, &stderr); code != ExitOK {
			b.Fatalf("exit %d\n%s", code, stderr.String())
		}
	}
}
