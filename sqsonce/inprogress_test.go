package sqsonce

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/sqsonce/sqsoncetest"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/memstore"
)

// inProgressBed is a processor on the in-memory store, with the store's
// clock and an SQS fake that records visibility changes.
type inProgressBed struct {
	store  *memstore.Store
	queues *fakeQueues
	url    string
	p      *Processor
	runs   atomic.Int32
}

func newInProgressBed(t *testing.T, configure func(*ConsumerConfig)) *inProgressBed {
	t.Helper()
	b := &inProgressBed{store: sqsoncetest.NewStore(), queues: newFakeQueues()}
	b.url = b.queues.newQueue(t, false, nil)
	cfg := ConsumerConfig{
		Config: Config{
			Store:     b.store,
			KeyPrefix: "orders",
			Test:      TestConfig{Now: b.store.Now, Rand: func() float64 { return 0.5 }},
		},
		Key: KeyFromBody("/orderId"),
		// A dummy region: the SQS calls go to the fake.
		AWS: awsOffline(),
	}
	if configure != nil {
		configure(&cfg)
	}
	var h Handler
	if cfg.Target == nil {
		h = func(context.Context, events.SQSMessage) error { b.runs.Add(1); return nil }
	}
	p, err := newProcessor(cfg, h, deps{sqs: b.queues})
	if err != nil {
		t.Fatal(err)
	}
	b.p = p
	return b
}

// record is a delivery of the order's message, with a receipt handle of its
// own.
func (b *inProgressBed) record(t *testing.T, id, order string) events.SQSMessage {
	t.Helper()
	ev := b.queues.event(t, b.url, `{"orderId":"`+order+`"}`)
	rec := ev.Records[0]
	rec.MessageId, rec.ReceiptHandle = id, "rh-"+id
	return rec
}

func (b *inProgressBed) handle(t *testing.T, recs ...events.SQSMessage) []string {
	t.Helper()
	resp, err := b.p.Handle(context.Background(), events.SQSEvent{Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	return failedOf(resp)
}

// A record refused by a live lock is hidden until that lock can be taken
// over (plus jitter), not for the queue's visibility timeout: its next
// receive is the one that takes the dead holder's lock over, and no receive
// is wasted in between.
func TestInProgressRecordIsHiddenUntilTheLockCanBeTakenOver(t *testing.T) {
	b := newInProgressBed(t, nil)
	// A holder killed while it held the key: its lock runs 30 s more.
	expiry := b.store.Now().Add(30 * time.Second)
	b.store.Put(store.Record{ID: store.RecordID("orders", "A-1"), Status: store.StatusProcessing, Owner: "killed",
		Fence: 7, LockExpiresAt: expiry, ExpiresAt: expiry.Add(store.FenceRetention)})

	rec := b.record(t, "m-1", "A-1")
	if failed := b.handle(t, rec); len(failed) != 1 {
		t.Fatalf("failed %v, want the in-progress record retried", failed)
	}
	hidden, ok := b.queues.visibilityChanges()[rec.ReceiptHandle]
	if !ok {
		t.Fatal("the in-progress record's visibility was not changed")
	}
	wait := time.Duration(hidden) * time.Second
	// Past the expiry (taken over only strictly after it) by at most the
	// jitter: a second, plus up to a tenth of the wait, at least a second.
	if lo, hi := 31*time.Second, 31*time.Second+4*time.Second; wait < lo || wait > hi {
		t.Fatalf("hidden %v, want from %v to %v: until the lock of 30 s can be taken over", wait, lo, hi)
	}

	// Its next receive, after that visibility timeout, takes the lock over.
	b.store.Advance(wait)
	again := b.record(t, "m-1", "A-1")
	again.ReceiptHandle = "rh-m-1-2"
	if failed := b.handle(t, again); len(failed) != 0 {
		t.Fatalf("the next receive: failed %v, want it processed (the dead holder's lock taken over)", failed)
	}
	if b.runs.Load() != 1 {
		t.Fatalf("handler ran %d times, want once", b.runs.Load())
	}
	if rec := b.store.Records()[store.RecordID("orders", "A-1")]; rec.Status != store.StatusCompleted || rec.Fence != 8 {
		t.Fatalf("record %+v, want COMPLETED with fence 8 (taken over from 7)", rec)
	}
}

// Without any AWS configuration (a test on the in-memory store) the
// processor makes no SQS call: the in-progress record is simply retried.
func TestInProgressWithoutAWSMakesNoCall(t *testing.T) {
	st := sqsoncetest.NewStore()
	var log syncBuffer
	p, err := NewConsumer(ConsumerConfig{Config: Config{Store: st, KeyPrefix: "orders", Logger: slog.New(slog.NewTextHandler(&log, nil)), Test: TestConfig{Now: st.Now}}}, func(context.Context, events.SQSMessage) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	st.Put(store.Record{ID: "orders#m-1", Status: store.StatusProcessing, Owner: "o", Fence: 1, LockExpiresAt: st.Now().Add(time.Minute)})
	resp, err := p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:q"}}})
	if err != nil || len(resp.BatchItemFailures) != 1 {
		t.Fatalf("Handle = %v, %v; want the record retried", resp, err)
	}
	// A visibility change attempted without AWS would fail and say so.
	if strings.Contains(log.String(), "visibility") || !strings.Contains(log.String(), "in progress elsewhere") {
		t.Fatalf("log:\n%s\nwant the in-progress line and no visibility change", log.String())
	}
}

// Two copies of one key in one batch (a producer's fast retry) run one
// after the other: the second is a duplicate of the first, one side
// effect, and no batch item failure.
func TestCopiesOfAKeyInOneBatch(t *testing.T) {
	t.Run("handler", func(t *testing.T) {
		b := newInProgressBed(t, func(c *ConsumerConfig) { c.MaxConcurrency = 10 })
		if failed := b.handle(t, b.record(t, "m-1", "A-1"), b.record(t, "m-2", "A-2"), b.record(t, "m-3", "A-1")); len(failed) != 0 {
			t.Fatalf("failed %v, want none", failed)
		}
		if b.runs.Load() != 2 {
			t.Fatalf("handler ran %d times, want 2 (A-1 once, A-2 once)", b.runs.Load())
		}
	})
	t.Run("handler, the first copy failed", func(t *testing.T) {
		b := newInProgressBed(t, nil)
		calls := 0
		p, err := newProcessor(ConsumerConfig{Config: Config{Store: b.store, KeyPrefix: "orders", Test: TestConfig{Now: b.store.Now}}, Key: KeyFromBody("/orderId")}, func(context.Context, events.SQSMessage) error {
			calls++ // one unit: the copies never run at once
			if calls == 1 {
				return errors.New("downstream down")
			}
			return nil
		}, deps{sqs: b.queues})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{b.record(t, "m-1", "A-1"), b.record(t, "m-2", "A-1")}})
		if err != nil {
			t.Fatal(err)
		}
		if got := failedOf(resp); len(got) != 1 || got[0] != "m-1" || calls != 2 {
			t.Fatalf("failed %v after %d calls; want m-1 failed and m-2 run after it (the lock released)", got, calls)
		}
	})
	t.Run("target", func(t *testing.T) {
		tg := &countingTarget{}
		b := newInProgressBed(t, func(c *ConsumerConfig) { c.Target = tg })
		if failed := b.handle(t, b.record(t, "m-1", "A-1"), b.record(t, "m-2", "A-1")); len(failed) != 0 {
			t.Fatalf("failed %v, want none", failed)
		}
		if tg.delivered.Load() != 1 {
			t.Fatalf("target got %d messages, want 1: the copy is a duplicate", tg.delivered.Load())
		}
	})
}

// countingTarget accepts every message and counts them.
type countingTarget struct{ delivered atomic.Int32 }

func (c *countingTarget) Deliver(_ context.Context, msgs []Delivery) []error {
	c.delivered.Add(int32(len(msgs)))
	return make([]error, len(msgs))
}

// awsOffline is an AWS configuration that reaches nothing: a processor
// needs one to make SQS calls, which the tests give to a fake.
func awsOffline() aws.Config {
	return aws.Config{Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:1")}
}
