package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/processor"
)

func TestLedgerAppendsConcurrentlyAndReadsBack(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	l, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			if _, err := l.Append(Entry{Key: fmt.Sprintf("k%d", i)}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	seqs := map[int]bool{}
	for _, e := range got {
		seqs[e.Seq] = true
	}
	if len(got) != 50 || len(seqs) != 50 || l.Count() != 50 {
		t.Errorf("%d entries with %d distinct seqs, count %d; want 50", len(got), len(seqs), l.Count())
	}
	if _, err := decodeLedger(strings.NewReader("{\"seq\":1}\n{broken\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("corrupt ledger: %v", err)
	}
}

type businessBundle struct {
	biz       *Business
	ledger    *Ledger
	w         Workload
	wantCrash bool
}

func setupBusiness(t *testing.T, spec WorkloadSpec) *businessBundle {
	t.Helper()
	w, err := NewWorkload(spec, 1, "run")
	if err != nil {
		t.Fatal(err)
	}
	l, err := OpenLedger(filepath.Join(t.TempDir(), "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &businessBundle{biz: NewBusiness(l, w), ledger: l, w: w}
}

func (b *businessBundle) msg(kind Kind) events.SQSMessage {
	keys := b.w.KeyIndex()
	for _, s := range b.w.Sends {
		k := keys[s.Key]
		if k.Kind == kind && k.Crash == b.wantCrash {
			return events.SQSMessage{MessageId: "m-" + s.ID, Body: b.w.Body(s, k.Kind, false), Attributes: map[string]string{"ApproximateReceiveCount": "1"}}
		}
	}
	panic("no such key")
}

func TestBusinessByKind(t *testing.T) {
	t.Parallel()
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})

	t.Run("poison always fails", func(t *testing.T) {
		t.Parallel()
		b := setupBusiness(t, WorkloadSpec{Keys: 2, Poison: 1, MaxReceiveCount: 3})
		m := b.msg(Poison)
		for range 10 {
			if err := b.biz.Handle(ctx, m); !errors.Is(err, errPoison) || processor.IsPermanent(err) {
				t.Fatalf("poison attempt: %v", err)
			}
		}
		if b.ledger.Count() != 0 {
			t.Error("poison key has a side effect")
		}
	})
	t.Run("transient fails its failures, then records once", func(t *testing.T) {
		t.Parallel()
		b := setupBusiness(t, WorkloadSpec{Keys: 2, Transient: 1, MaxReceiveCount: 3})
		m := b.msg(Transient)
		m.MessageAttributes = map[string]events.SQSMessageAttribute{"sqs-dlq-replay-nb": {DataType: "Number", StringValue: aws.String("1")}}
		for i := range 2 {
			if err := b.biz.Handle(ctx, m); !errors.Is(err, errTransient) {
				t.Fatalf("attempt %d: %v", i+1, err)
			}
		}
		if err := b.biz.Handle(ctx, m); err != nil {
			t.Fatalf("third attempt: %v", err)
		}
		b.ledger.Close()
		got, _ := ReadLedger(b.ledger.Path())
		if len(got) != 1 || got[0].RequestID != "req-1" || got[0].ReplayCount != "1" || got[0].MessageID != m.MessageId || got[0].ReceiveCount != "1" {
			t.Errorf("ledger %+v", got)
		}
	})
	t.Run("permanent is marked permanent", func(t *testing.T) {
		t.Parallel()
		b := setupBusiness(t, WorkloadSpec{Keys: 2, Permanent: 1, MaxReceiveCount: 3})
		if err := b.biz.Handle(ctx, b.msg(Permanent)); !processor.IsPermanent(err) {
			t.Errorf("permanent key: %v", err)
		}
	})
	t.Run("unparsable body is permanent", func(t *testing.T) {
		t.Parallel()
		b := setupBusiness(t, WorkloadSpec{Keys: 1, MaxReceiveCount: 3})
		if err := b.biz.Handle(ctx, events.SQSMessage{Body: "{"}); !processor.IsPermanent(err) {
			t.Errorf("bad body: %v", err)
		}
	})
}

// TestBusinessCrashHangsAfterTheSideEffect: the side effect is recorded, then
// the call does not return (no completion, no release) until the run ends.
func TestBusinessCrashHangsAfterTheSideEffect(t *testing.T) {
	t.Parallel()
	b := setupBusiness(t, WorkloadSpec{Keys: 3, Crash: 1, MaxReceiveCount: 3})
	b.wantCrash = true
	m := b.msg(Normal)
	returned := make(chan error, 1)
	go func() { returned <- b.biz.Handle(context.Background(), m) }()
	for b.ledger.Count() == 0 {
		time.Sleep(time.Millisecond) // waits for the goroutine, not for time-based behaviour
	}
	select {
	case err := <-returned:
		t.Fatalf("crashed call returned %v before the run ended", err)
	default:
	}
	b.biz.Release()
	if err := <-returned; !errors.Is(err, errCrashed) {
		t.Errorf("released crash returned %v", err)
	}
	// The redelivery runs normally and records a second side effect.
	if err := b.biz.Handle(context.Background(), m); err != nil || b.ledger.Count() != 2 {
		t.Errorf("redelivery: %v, %d side effects", err, b.ledger.Count())
	}
}

func TestAcceptedReplays(t *testing.T) {
	t.Parallel()
	w, _ := NewWorkload(WorkloadSpec{Keys: 2, MaxReceiveCount: 1}, 1, "r")
	entry := func(id string, s Send, n string, delay int32) sqstypes.SendMessageBatchRequestEntry {
		return sqstypes.SendMessageBatchRequestEntry{
			Id: aws.String(id), MessageBody: aws.String(w.Body(s, Normal, false)), DelaySeconds: delay,
			MessageAttributes: map[string]sqstypes.MessageAttributeValue{"sqs-dlq-replay-nb": {DataType: aws.String("Number"), StringValue: aws.String(n)}},
		}
	}
	req := &sqs.SendMessageBatchInput{Entries: []sqstypes.SendMessageBatchRequestEntry{entry("a", w.Sends[0], "1", 2), entry("b", w.Sends[1], "2", 3)}}
	resp := &sqs.SendMessageBatchOutput{
		Successful: []sqstypes.SendMessageBatchResultEntry{{Id: aws.String("b")}},
		Failed:     []sqstypes.BatchResultErrorEntry{{Id: aws.String("a")}},
	}
	got := acceptedReplays(req, resp)
	if len(got) != 1 || got[0] != (Replay{Send: w.Sends[1].ID, Attempt: 2, Delay: 3}) {
		t.Errorf("accepted replays %+v, want only b's", got)
	}
}

func TestProgressOutsideATerminal(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	pw := newProgressWriter(&buf)
	t0 := time.Unix(0, 0)
	p := Progress{Resolved: 5, Sent: 10, Processed: 4, Suppressed: 1, DeadLettered: 2, Replays: 3, Operator: 1, Elapsed: 2 * time.Second}
	pw.Update(p, t0, false)
	pw.Update(p, t0.Add(time.Second), false) // too soon for a plain line
	pw.Update(p, t0.Add(6*time.Second), false)
	pw.Done()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || strings.Contains(buf.String(), "\r") {
		t.Errorf("plain output %q: want 2 lines and no carriage return", buf.String())
	}
	if want := "5/10 messages done · 4 processed · 1 duplicates suppressed · 2 dead-lettered · 3 replays · 1 at operator"; !strings.Contains(lines[0], want) {
		t.Errorf("line %q lacks %q", lines[0], want)
	}
}

func TestParseFlags(t *testing.T) {
	t.Parallel()
	o, err := ParseFlags(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.Keys != 1000 || o.DuplicateShare != 0.2 || o.Seed != 1 || o.MaxAttempts != -1 || o.MaxReceiveCount != 0 || o.wait() != defaultLocalWait {
		t.Errorf("defaults %+v", o)
	}
	var help bytes.Buffer
	if _, err := ParseFlags([]string{"--help"}, &help); !errors.Is(err, ErrHelp) || !strings.Contains(help.String(), "-poison") || !strings.Contains(help.String(), "Exit") {
		t.Errorf("--help: %v\n%s", err, help.String())
	}
	for args, want := range map[string]string{
		"-n 0":                       "-n 0",
		"-concurrency 0":             "-concurrency",
		"-visibility 1500ms":         "whole seconds",
		"-stack s -crash 1":          "-crash needs the local pipeline",
		"-poison 600 -transient 600": "more than -n",
		"extra":                      "unexpected arguments",
		"-dup 2":                     "-dup",
	} {
		if _, err := ParseFlags(strings.Fields(args), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseFlags(%s) = %v, want an error with %q", args, err, want)
		}
	}
}
