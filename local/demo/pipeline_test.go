package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/sqs-once/sqs-once/sqsonce"
)

// TestParseFlagsEmit: -emit and -emit-inline set the pipeline's mode, and
// are refused where no local business handler runs or where the report
// could not explain what they show.
func TestParseFlagsEmit(t *testing.T) {
	t.Parallel()
	for args, want := range map[string]string{"-emit": EmitStaged, "-emit-inline": EmitInline, "": ""} {
		o, err := ParseFlags(strings.Fields(args), &bytes.Buffer{})
		if err != nil || o.Emit != want {
			t.Errorf("ParseFlags(%s): Emit %q, %v; want %q", args, o.Emit, err, want)
		}
	}
	for args, want := range map[string]string{
		"-emit -emit-inline":    "choose one",
		"-emit -tx":             "-emit -tx",
		"-emit-inline -stack s": "-emit-inline needs the local pipeline",
		"-emit -target sqs":     "nothing emits",
		"-emit -chaos light":    "-emit -chaos",
	} {
		if _, err := ParseFlags(strings.Fields(args), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseFlags(%s) = %v, want an error with %q", args, err, want)
		}
	}
}

// TestCheckStage2: with -emit any order shipped twice fails the run; with
// -emit-inline one that stage 1's handler ran twice in an injected window
// is the control's outcome, reported, and one shipped more often than that
// fails. An order stage 1 accepted and stage 2 never shipped fails both.
func TestCheckStage2(t *testing.T) {
	t.Parallel()
	w, err := NewWorkload(WorkloadSpec{Keys: 3, MaxReceiveCount: 3}, 1, "r")
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := w.Keys[0].ID, w.Keys[1].ID, w.Keys[2].ID
	effects := map[string][]Entry{a: {{Key: a}}, b: {{Key: b}, {Key: b}}, c: {{Key: c}}}
	ships := []Entry{{Key: a}, {Key: b}, {Key: b}, {Key: c}}
	arrivals := []arrival2{{"m1", "e1", a}, {"m2", "e2", b}, {"m3", "e3", b}, {"m4", "e4", c}, {"m4", "e4", c}, {"m5", "e4", c}}
	run := func(mode string, ships []Entry, window bool) Summary {
		var s Summary
		if window {
			s.Window.Keys = []WindowKey{{Key: b, SideEffects: 2, Injected: true}}
		}
		s.checkStage2(w, effects, &Stage2{Mode: mode, Queue: "q", Ships: ships, Arrivals: arrivals})
		s.OK = len(s.Violations) == 0
		return s
	}

	s := run(EmitInline, ships, true)
	if st := s.Stage2; !s.OK || st.MoreThanOnce != 1 || st.Explained != 1 || st.ExactlyOnce != 2 || st.Messages != 5 || st.Repeats != 1 || st.Deliveries != 6 || st.Keys != 3 {
		t.Errorf("the control: %+v, violations %v", st, s.Violations)
	}
	var out strings.Builder
	s.renderStage2(func(f string, args ...any) { out.WriteString(strings.TrimSpace(fmt.Sprintf(f, args...)) + "\n") })
	if !strings.Contains(out.String(), "nothing downstream can tell the copies apart") || strings.Contains(out.String(), "[FAIL]") {
		t.Errorf("the control's lines:\n%s", out.String())
	}
	if s := run(EmitInline, ships, false); s.OK || !strings.Contains(strings.Join(s.Violations, "\n"), "shipped more than once ("+b+")") {
		t.Errorf("-emit-inline, a second shipment no injected window explains: violations %v", s.Violations)
	}
	if s := run(EmitInline, append(ships, Entry{Key: b}), true); s.OK {
		t.Errorf("-emit-inline, three shipments for two runs of the handler: violations %v", s.Violations)
	}
	if s := run(EmitStaged, ships, true); s.OK || s.Stage2.Explained != 0 || !strings.Contains(strings.Join(s.Violations, "\n"), "emit id") {
		t.Errorf("-emit, an order shipped twice: %+v, violations %v", s.Stage2, s.Violations)
	}
	if s := run(EmitStaged, []Entry{{Key: a}, {Key: b}}, false); s.OK || s.Stage2.Missing != 1 || s.Stage2.MissingKeys[0] != c {
		t.Errorf("-emit, %s never shipped: %+v, violations %v", c, s.Stage2, s.Violations)
	}
	if s := run(EmitStaged, []Entry{{Key: a}, {Key: b}, {Key: c}}, false); !s.OK || s.Stage2.ExactlyOnce != 3 || stage2Suffix(s.Stage2) != "; stage 2 shipped every order once" {
		t.Errorf("-emit, every order once: %+v, violations %v", s.Stage2, s.Violations)
	}
}

// TestCrashingSender: an -emit crash key's first send hangs until the run
// releases it, before the messages are sent or after, and fails; every
// other send, and the key's next, goes through.
func TestCrashingSender(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testCrashingSender)
}

func testCrashingSender(t *testing.T) {
	w, err := NewWorkload(WorkloadSpec{Keys: 4, Crash: 2, MaxReceiveCount: 3}, 1, "r")
	if err != nil {
		t.Fatal(err)
	}
	p := &pipeline{mode: EmitStaged, runID: "r"}
	p.planCrashes(w)
	var crashKeys, others []string
	for _, k := range w.Keys {
		if k.Crash {
			crashKeys = append(crashKeys, k.ID)
		} else {
			others = append(others, k.ID)
		}
	}
	if len(crashKeys) != 2 || p.crashes[crashKeys[0]] != crashBeforeSend || p.crashes[crashKeys[1]] != crashAfterSend {
		t.Fatalf("crashes planned %v for crash keys %v", p.crashes, crashKeys)
	}
	next := &recordingSender{}
	release := make(chan struct{})
	s := &crashingSender{next: next, pipe: p, release: release}
	msg := func(key string) []sqsonce.Outgoing {
		return []sqsonce.Outgoing{{Message: sqsonce.Message{To: "sqs:http://q", Body: `{"event":"OrderAccepted","orderId":"` + key + `","run":"r"}`}, ID: "id-" + key}}
	}
	ctx := context.Background()
	if errs := s.Send(ctx, msg(others[0])); errs[0] != nil || next.sent != 1 {
		t.Errorf("a normal key's send: %v, %d sent", errs, next.sent)
	}
	done := make(chan []error, 2)
	go func() { done <- s.Send(ctx, msg(crashKeys[0])) }()
	go func() { done <- s.Send(ctx, msg(crashKeys[1])) }()
	synctest.Wait()
	if len(done) != 0 {
		t.Fatal("a crash key's send returned before the run released it")
	}
	close(release)
	for range 2 {
		if errs := <-done; !errors.Is(errs[0], errSendCrashed) {
			t.Errorf("a crashed send answered %v", errs)
		}
	}
	if next.sent != 2 {
		t.Errorf("%d messages reached the queue, want the normal key's and the one crashed after its send", next.sent)
	}
	if errs := s.Send(ctx, msg(crashKeys[0])); errs[0] != nil || next.sent != 3 {
		t.Errorf("the crash key's relay: %v, %d sent", errs, next.sent)
	}
}

type recordingSender struct{ sent int }

func (r *recordingSender) Send(_ context.Context, msgs []sqsonce.Outgoing) []error {
	r.sent += len(msgs)
	return make([]error, len(msgs))
}
