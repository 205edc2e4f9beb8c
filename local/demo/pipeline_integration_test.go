//go:build integration

package demo

import (
	"strings"
	"testing"
)

// emitFlags are the crash runs of the pipeline: 40 orders, no failing
// ones, two crash keys, the demo's function timeout (10 s: 5 s left a busy
// machine's healthy invocations timing out beside the crashed ones).
func emitFlags(t *testing.T, mode string) []string {
	return baseFlags(t, "-n", "40", "-poison", "0", "-transient", "0", "-permanent", "0", "-crash", "2", "-function-timeout", "10s", mode)
}

// TestDemoEmitCrashShipsOnce: with -emit each crash key's invocation
// commits its completion, with the OrderAccepted staged in it, and hangs
// in the send: one before the message left (the redelivery relays it),
// one after it reached the queue (the redelivery sends it again, with the
// same emit id). Stage 1 has one side effect per key, and stage 2, keyed
// on the emit id, ships every order once: more than once 0, missing 0,
// although one message arrived twice.
func TestDemoEmitCrashShipsOnce(t *testing.T) {
	t.Parallel()
	s, code, report := runMain(t, emitFlags(t, "-emit"))
	if code != ExitOK || !s.OK {
		t.Fatalf("exit %d, violations %v\n%s", code, s.Violations, report)
	}
	if se := s.SideEffects; se.Multiple != 0 || se.ExactlyOnce != 40 || s.Lost != 0 || len(s.Window.Keys) != 0 {
		t.Errorf("stage 1 side effects %+v, window %+v, lost %d", se, s.Window.Keys, s.Lost)
	}
	if iv := s.Invocations; iv.TimedOutCrash != 2 || iv.TimedOut != 2 || len(s.Unexpected) != 0 {
		t.Errorf("invocations %+v, notes %v: want the 2 crashes", iv, s.Unexpected)
	}
	st := s.Stage2
	if st == nil {
		t.Fatalf("no stage 2 in the summary\n%s", report)
	}
	// The crash after the send makes one message arrive twice (a re-sent
	// copy of a key that finds its completion's message still pending
	// relays it too, so there can be more): the emit id is what keeps
	// those orders from shipping twice.
	if st.Mode != EmitStaged || st.MoreThanOnce != 0 || st.Missing != 0 || st.ExactlyOnce != 40 || st.Shipments != 40 || st.Repeats < 1 || st.Messages != 40+st.Repeats {
		t.Errorf("stage 2 %+v: want 40 orders shipped once, of 40 messages and at least one repeat", st)
	}
	for _, want := range []string{"emitted (-emit)", "  more than once      0 keys  [ok]", "  missing             0  [ok]", "of them a repeat of an emitted message",
		"whose invocation hangs after its commit", "duplicate window      not hit", "stage 2 shipped every order once"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}

// TestDemoEmitInlineCrashShipsTwice is the control: the handler sends the
// OrderAccepted itself, then the crash keys' invocations hang after it.
// Their redeliveries run the handler again once the lock expired (stage
// 1's documented window) and send again, with a new id: stage 2 ships
// those orders twice, and the report says why.
func TestDemoEmitInlineCrashShipsTwice(t *testing.T) {
	t.Parallel()
	s, code, report := runMain(t, emitFlags(t, "-emit-inline"))
	if code != ExitOK || !s.OK {
		t.Fatalf("exit %d, violations %v\n%s", code, s.Violations, report)
	}
	if se := s.SideEffects; se.Multiple != 2 || se.InWindow != 2 || s.Lost != 0 {
		t.Errorf("stage 1 side effects %+v, lost %d: want the crash keys twice, in the window", se, s.Lost)
	}
	st := s.Stage2
	if st == nil || st.Mode != EmitInline || st.MoreThanOnce != 2 || st.Explained != 2 || st.Missing != 0 || st.Shipments != 42 || st.Repeats != 0 {
		t.Fatalf("stage 2 %+v: want the 2 crash keys shipped twice\n%s", st, report)
	}
	for _, want := range []string{"sent (-emit-inline)", "  more than once      2 keys (", "nothing downstream can tell the copies apart", "stage 2 shipped 2 orders more than once"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}
