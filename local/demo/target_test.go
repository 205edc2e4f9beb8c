package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// TestParseFlagsTarget: -target takes "sqs" or nothing; with it the keys the
// business handler makes fail default to none, and asking for some is a
// usage error that says why, as is any other target or -stack.
func TestParseFlagsTarget(t *testing.T) {
	t.Parallel()
	o, err := ParseFlags(nil, &bytes.Buffer{})
	if err != nil || o.Target != "" || o.Poison != 3 || o.Transient != 4 || o.Permanent != 2 {
		t.Fatalf("defaults %+v, %v: want no target and the handler's failing keys", o, err)
	}
	for _, args := range []string{"-target sqs", "-target=sqs -poison 0 -crash 0", "-target sqs -n 30 -dup 0.5 -max-receive-count 3"} {
		o, err := ParseFlags(strings.Fields(args), &bytes.Buffer{})
		if err != nil || o.Target != TargetSQS || o.Poison+o.Transient+o.Permanent+o.Crash != 0 {
			t.Errorf("ParseFlags(%s) = %+v, %v; want target sqs and no failing keys", args, o, err)
		}
	}
	for args, want := range map[string]string{
		"-target sns":                        `-target "sns": the demo knows "sqs"`,
		"-target lambda":                     `-target "lambda"`,
		"-target SQS":                        `-target "SQS"`,
		"-target sqs -poison 2":              "-poison: no business handler runs with -target sqs",
		"-target sqs -transient 1":           "-transient: no business handler runs",
		"-target sqs -crash 1":               "-crash: no business handler runs",
		"-target sqs -permanent 1 -poison 1": "-permanent, -poison: no business handler runs",
		"-target sqs -stack s":               "-target needs the local pipeline",
	} {
		if _, err := ParseFlags(strings.Fields(args), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseFlags(%s) = %v, want an error with %q", args, err, want)
		}
	}
	// Options built in code are held to the same rule.
	if err := (Options{Keys: 10, Concurrency: 1, MaxAttempts: -1, Visibility: 1e9, Target: TargetSQS, Poison: 1}).Validate(); err == nil || !strings.Contains(err.Error(), "must be 0") {
		t.Errorf("Validate with a target and poison keys: %v", err)
	}
	var help bytes.Buffer
	if _, err := ParseFlags([]string{"-help"}, &help); !errors.Is(err, ErrHelp) || !strings.Contains(help.String(), "-target") || !strings.Contains(help.String(), "With -target sqs") {
		t.Errorf("usage does not explain -target: %v\n%s", err, help.String())
	}
}

// TestMainRefusesUnknownTarget: a bad -target is a usage error (exit 2)
// before anything is started.
func TestMainRefusesUnknownTarget(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"-target", "events"}, &stdout, &stderr)
	if code != ExitUsage || !strings.Contains(stderr.String(), `sqs-once-local: -target "events"`) || stdout.Len() != 0 {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and the reason", code, stdout.String(), stderr.String())
	}
}

// targetScenario is a small finished -target sqs run: every key's first send
// forwarded once under its own lock, accepted and completed by the
// invocation that sent it, every send deleted from the main queue.
type targetScenario struct {
	w        Workload
	p        *producer
	landings []Landing
	obs      Observed
	fobs     ForwardObserved
}

func newTargetScenario(t *testing.T) *targetScenario {
	t.Helper()
	w, err := NewWorkload(WorkloadSpec{Keys: 12, DuplicateShare: 0.5, MaxReceiveCount: 3}, 3, "r")
	if err != nil {
		t.Fatal(err)
	}
	sc := &targetScenario{
		w: w,
		p: &producer{w: w, keys: w.KeyIndex(), body: func(s Send, k Key) string { return w.Body(s, k.Kind, false) }, attrs: targetAttributes},
		obs: Observed{
			Acked: map[string]bool{}, Operator: map[string][]Arrival{}, Invocations: map[string]InvocationInfo{},
			Left: map[string]int{"main": 0, "dead-letter": 0, "target": 0},
		},
		fobs: ForwardObserved{Attempts: map[lockID]int{}},
	}
	for _, s := range w.Sends {
		sc.obs.Acked[s.ID] = true
		if s.Copy == 1 {
			sc.forward(s, 100, true)
		}
	}
	return sc
}

// forward has send s handed to the target under fence, by an invocation of
// its own, accepted and arrived once; completed adds its COMPLETED write.
func (sc *targetScenario) forward(s Send, fence int64, completed bool) string {
	req := "req-" + s.ID + "-" + strconv.FormatInt(fence, 10)
	sc.obs.Invocations[req] = InvocationInfo{Started: t0}
	sc.fobs.Forwards = append(sc.fobs.Forwards, Forward{Key: s.Key, Fence: fence, Send: s.ID, RequestID: req, At: t0, Outcome: ForwardAccepted})
	sc.fobs.Attempts[lockID{s.Key, fence}]++
	if completed {
		sc.obs.Completions = append(sc.obs.Completions, Completion{Key: s.Key, RequestID: req, At: t0, OK: true})
	}
	sc.arrive(s, fence)
	return req
}

// arrive puts s's message into the target queue as the sqs target sends it.
func (sc *targetScenario) arrive(s Send, fence int64) {
	body, attrs := sc.p.message(s)
	e := events.SQSMessage{Body: body, MessageAttributes: map[string]events.SQSMessageAttribute{}}
	for name, v := range attrs {
		e.MessageAttributes[name] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue, BinaryValue: v.BinaryValue}
	}
	got := map[string]sqstypes.MessageAttributeValue{}
	for name, v := range attrs {
		got[name] = v
	}
	got[targets.AttrKey] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s.Key)}
	got[targets.AttrFence] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(strconv.FormatInt(fence, 10))}
	sc.landings = append(sc.landings, Landing{MessageID: "m" + strconv.Itoa(len(sc.landings)), Body: body, Attributes: got})
}

func (sc *targetScenario) summarize() Summary {
	return SummarizeTarget(sc.w, sc.landings, sc.obs, sc.fobs, TargetEvaluation{
		Evaluation: Evaluation{Mode: "local", LockHold: lockHold},
		Target:     "sqs:https://sqs.us-east-1.amazonaws.com/123456789012/q", Queue: "http://local/123456789012/q",
		Message: sc.p.message,
	})
}

func (sc *targetScenario) firstSend() Send { return sc.w.Sends[0] }

func TestSummarizeTargetCleanRun(t *testing.T) {
	t.Parallel()
	sc := newTargetScenario(t)
	s := sc.summarize()
	ts := s.Target
	if !s.OK || len(s.Violations) != 0 || len(s.Unexpected) != 0 {
		t.Fatalf("clean run not OK: %v %v", s.Violations, s.Unexpected)
	}
	st := sc.w.Stats()
	if ts.KeysSent != 12 || ts.CopiesSent != st.Messages || ts.Arrived != 12 || ts.ExactlyOnce != 12 || ts.MoreThanOnce != 0 || ts.NeverArrived != 0 ||
		ts.BodiesIntact != 12 || ts.AttributesIntact != 12 || s.Processed != 12 || s.DuplicatesSuppressed != st.ExtraCopies || s.Lost != 0 {
		t.Errorf("summary %+v, target %+v", s, ts)
	}
	if strings.Join(ts.SentAttributes, ", ") != "amount (Number.cents), note (String.utf8), producer (String), trace (Binary)" {
		t.Errorf("sent attributes %v", ts.SentAttributes)
	}
	text := s.Render()
	for _, line := range []string{
		"exactly once        12 keys", "more than once      0 keys  [ok]", "never arrived       0 keys  [ok]",
		"attributes intact   12 of 12 messages", "verdict: OK: every key forwarded to the target queue exactly once, intact, nothing lost",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("report lacks %q:\n%s", line, text)
		}
	}
	if strings.Contains(text, "  poison  ") || strings.Contains(text, "side effects") || strings.Contains(text, "documented window") {
		t.Errorf("a target run's report speaks of the business handler:\n%s", text)
	}
}

// TestSummarizeTargetViolations breaks a clean run in each way the report
// must catch.
func TestSummarizeTargetViolations(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		breakIt func(sc *targetScenario)
		want    string
		check   func(s Summary) bool
	}{
		"a key never arrives": {
			func(sc *targetScenario) { sc.landings = sc.landings[1:] },
			"1 key never arrived in the target queue",
			func(s Summary) bool { return s.Target.NeverArrived == 1 && s.Lost >= 1 },
		},
		"a send is never deleted": {
			func(sc *targetScenario) { delete(sc.obs.Acked, sc.firstSend().ID) },
			"lost: 1 message ",
			func(s Summary) bool { return s.Lost == 1 },
		},
		"an attribute's bytes change": {
			func(sc *targetScenario) {
				sc.landings[0].Attributes["trace"] = sqstypes.MessageAttributeValue{DataType: aws.String("Binary"), BinaryValue: []byte("other")}
			},
			"1 message arrived with other attributes than those sent: m0 (trace is Binary",
			func(s Summary) bool { return s.Target.AttributesIntact == 11 },
		},
		"a data type changes": {
			func(sc *targetScenario) {
				sc.landings[0].Attributes["amount"] = sqstypes.MessageAttributeValue{DataType: aws.String("Number"), StringValue: sc.landings[0].Attributes["amount"].StringValue}
			},
			"amount is Number",
			func(s Summary) bool { return s.Target.AttributesIntact == 11 },
		},
		"an attribute is lost": {
			func(sc *targetScenario) { delete(sc.landings[0].Attributes, "note") },
			"note missing",
			func(s Summary) bool { return s.Target.AttributesIntact == 11 },
		},
		"the key attribute disagrees with the body": {
			func(sc *targetScenario) {
				sc.landings[0].Attributes[targets.AttrKey] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String("order-99999")}
			},
			`sqs-once-key "order-99999", the body's orderId`,
			func(s Summary) bool { return s.Target.AttributesIntact == 11 },
		},
		"the body changes": {
			func(sc *targetScenario) {
				sc.landings[0].Body = strings.Replace(sc.landings[0].Body, `"amountCents":`, `"amountCents": `, 1)
			},
			"1 message arrived with a body other than the one sent",
			func(s Summary) bool { return s.Target.BodiesIntact == 11 },
		},
		"a message of another run": {
			func(sc *targetScenario) {
				sc.landings = append(sc.landings, Landing{MessageID: "x", Body: `{"send":"s1","run":"other"}`})
			},
			"message x in the target queue is not one this run sent",
			func(s Summary) bool { return true },
		},
		"a second lock delivers a completed key": {
			func(sc *targetScenario) { sc.forward(sc.firstSend(), 101, true) },
			"recorded the completion of fence 100, yet fence 101 delivered the key again",
			func(s Summary) bool { return s.Target.MoreThanOnce == 1 && s.Target.Explained == 0 },
		},
		"a copy arrives twice under one lock sent once": {
			func(sc *targetScenario) { sc.arrive(sc.firstSend(), 100) },
			"2 copies under one lock (fence 100), yet the target's SQS client sent it in 1 attempt",
			func(s Summary) bool { return s.Target.MoreThanOnce == 1 && s.Target.Explained == 0 },
		},
		"the target said not sent, yet it arrived": {
			func(sc *targetScenario) {
				sc.obs.Completions = sc.obs.Completions[1:]
				sc.fobs.Forwards[0].Outcome = ForwardFailed
				sc.forward(sc.firstSend(), 101, true)
			},
			"as not sent, yet it arrived",
			func(s Summary) bool { return s.Target.Explained == 0 },
		},
		"a key left the lock without completing": {
			func(sc *targetScenario) {
				sc.obs.Completions = sc.obs.Completions[1:]
				sc.forward(sc.firstSend(), 101, true)
			},
			"ended without recording its completion, and fence 101 followed",
			func(s Summary) bool { return s.Target.Explained == 0 },
		},
		"the target queue is not drained": {
			func(sc *targetScenario) { sc.obs.Left["target"] = 2 },
			"the target queue still holds 2 messages",
			func(s Summary) bool { return true },
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sc := newTargetScenario(t)
			c.breakIt(sc)
			s := sc.summarize()
			if s.OK || !strings.Contains(strings.Join(s.Violations, "\n"), c.want) || !c.check(s) {
				t.Errorf("ok %v, violations %q, target %+v; want a violation with %q", s.OK, s.Violations, s.Target, c.want)
			}
			if text := s.Render(); !strings.Contains(text, "verdict: FAILED") {
				t.Errorf("report does not fail:\n%s", text)
			}
		})
	}
}

// TestSummarizeTargetExplainedDuplicates: a second copy of a key is named
// with the documented limit that explains it, and accepted only when the
// demo injected faults (-chaos); without, the demo's own timings made it,
// and the run fails saying so.
func TestSummarizeTargetExplainedDuplicates(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		dup  func(sc *targetScenario)
		want string
	}{
		"the SDK sent one lock's message again": {
			func(sc *targetScenario) {
				sc.fobs.Attempts[lockID{sc.firstSend().Key, 100}]++
				sc.arrive(sc.firstSend(), 100)
			},
			"sent again by the SDK after an attempt whose answer was lost (2 attempts)",
		},
		"the first invocation was abandoned at its timeout": {
			func(sc *targetScenario) {
				req := sc.fobs.Forwards[0].RequestID
				sc.obs.Completions = sc.obs.Completions[1:]
				sc.obs.Invocations[req] = InvocationInfo{Started: t0, Abandoned: true}
				sc.forward(sc.firstSend(), 101, true)
			},
			"was abandoned at its timeout after the queue accepted the message; fence 101 took the expired lock over",
		},
		"the target could not confirm the send": {
			func(sc *targetScenario) {
				sc.obs.Completions = sc.obs.Completions[1:]
				sc.fobs.Forwards[0].Outcome = ForwardUnknown
				sc.forward(sc.firstSend(), 101, true)
			},
			"could not confirm the send (outcome unknown)",
		},
		"the COMPLETED write failed": {
			func(sc *targetScenario) {
				sc.obs.Completions[0].OK = false
				sc.forward(sc.firstSend(), 101, true)
			},
			"COMPLETED write failed",
		},
	} {
		for _, chaos := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/chaos=%v", name, chaos), func(t *testing.T) {
				t.Parallel()
				sc := newTargetScenario(t)
				if chaos {
					sc.obs.Chaos = &ChaosStats{Level: ChaosHeavy}
				}
				c.dup(sc)
				s := sc.summarize()
				ts := s.Target
				if s.OK != chaos || ts.MoreThanOnce != 1 || ts.Explained != 1 || ts.ExactlyOnce != 11 || len(ts.Duplicates) != 1 ||
					!strings.Contains(strings.Join(ts.Duplicates[0].Causes, "; "), c.want) {
					t.Fatalf("ok %v, violations %v, target %+v; want one duplicate explained with %q, OK only with -chaos", s.OK, s.Violations, ts, c.want)
				}
				text := s.Render()
				lines := []string{"more than once      1 key: 1 explained by a documented limit, 0 not  [ok]", c.want}
				if chaos {
					lines = append(lines, "(except 1 key that arrived more than once, each copy explained by a documented limit)")
				} else {
					lines = append(lines, "VIOLATION: 1 key arrived more than once in the target queue although the demo injected no fault ("+sc.firstSend().Key+")", "why: ", "verdict: FAILED")
				}
				for _, line := range lines {
					if !strings.Contains(text, line) {
						t.Errorf("report lacks %q:\n%s", line, text)
					}
				}
			})
		}
	}
}

// TestProgressLineWithATarget: with a target the line counts keys forwarded,
// not side effects processed.
func TestProgressLineWithATarget(t *testing.T) {
	t.Parallel()
	line := Progress{Resolved: 5, Sent: 10, Processed: 4, Suppressed: 1, Forwarding: true}.Line()
	if !strings.Contains(line, "5/10 messages done · 4 forwarded · 1 duplicate suppressed") || strings.Contains(line, "processed") {
		t.Errorf("line %q", line)
	}
}
