package sqsonce

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/memstore"
)

// countingStore counts a store's calls: each is one call to the database
// on the stores of sqs-once (on DynamoDB: Acquire, Complete and MarkSent an
// UpdateItem each, Read a GetItem). It hides the store's Transactor: a
// handler that writes nothing of its own completes with Complete on
// either.
type countingStore struct {
	store.Store
	calls atomic.Int64
}

func (c *countingStore) Acquire(ctx context.Context, req store.AcquireRequest) (store.Lease, error) {
	c.calls.Add(1)
	return c.Store.Acquire(ctx, req)
}

func (c *countingStore) Renew(ctx context.Context, lease store.Lease, lockUntil time.Time) (store.Lease, error) {
	c.calls.Add(1)
	return c.Store.Renew(ctx, lease, lockUntil)
}

func (c *countingStore) Complete(ctx context.Context, lease store.Lease, comp store.Completion) error {
	c.calls.Add(1)
	return c.Store.Complete(ctx, lease, comp)
}

func (c *countingStore) Release(ctx context.Context, lease store.Lease, now time.Time) error {
	c.calls.Add(1)
	return c.Store.Release(ctx, lease, now)
}

func (c *countingStore) MarkSent(ctx context.Context, rec store.Record) error {
	c.calls.Add(1)
	return c.Store.MarkSent(ctx, rec)
}

func (c *countingStore) Read(ctx context.Context, id string) (store.Record, error) {
	c.calls.Add(1)
	return c.Store.Read(ctx, id)
}

// countingSender is a Sender that counts its calls and the messages
// given to it; while refuse is set it refuses every message (the
// destination throttled), leaving the key's messages pending.
type countingSender struct {
	calls, msgs atomic.Int64
	refuse      atomic.Bool
}

func (s *countingSender) Send(_ context.Context, msgs []Outgoing) []error {
	errs := make([]error, len(msgs))
	if s.refuse.Load() {
		for i := range errs {
			errs[i] = errors.New("throttled")
		}
		return errs
	}
	s.calls.Add(1)
	s.msgs.Add(int64(len(msgs)))
	return errs
}

// BenchmarkEmit is one record whose handler emits k messages (k = 0, 1,
// 10, to one queue), on the in-memory store behind a counting store, with
// a counting Sender: the store calls, the Sender's calls and the messages
// it sent per record (benchEmit). On the DynamoDB store each store call is
// one DynamoDB call, which BenchmarkEmitOnDynamoDB counts on the wire of
// moto_server.
//
//	go test -run '^$' -bench '^BenchmarkEmit$' -benchmem ./sqsonce
func BenchmarkEmit(b *testing.B) {
	benchEmit(b, "store-calls/record", func(*testing.B) (store.Store, func() int64, func() time.Time) {
		ms := memstore.New()
		st := &countingStore{Store: ms}
		return st, st.calls.Load, ms.Now
	})
}

// benchEmit runs the cases of an emitting handler on the stores
// newStore makes (with its call counter and clock), reporting the calls
// per record as unit: for k = 0, 1 and 10 messages to one queue, a new
// key, a duplicate whose messages are still pending (the redelivery that
// relays them), a duplicate once they were sent, and a warm duplicate
// (LocalCache). k = 0 is the plain path: Emit never called. The Sender
// counts its calls ("sends/record": one Send per relay, which
// targets.Sender makes one SendMessageBatch per destination and ten
// messages) and the messages ("messages/record").
func benchEmit(b *testing.B, unit string, newStore func(*testing.B) (store.Store, func() int64, func() time.Time)) {
	for _, k := range []int{0, 1, 10} {
		for _, c := range []struct {
			name string
			// pending: each iteration's key is first delivered with the
			// Sender refusing (its messages left pending), untimed and
			// uncounted; the iteration is its redelivery.
			pending bool
			// repeat: every iteration delivers one key, completed (and
			// its messages sent) before the loop.
			repeat bool
			cache  int
		}{
			{name: "new"},
			{name: "duplicate-pending", pending: true},
			{name: "duplicate-sent", repeat: true},
			{name: "duplicate-cached", repeat: true, cache: 1000},
		} {
			if c.pending && k == 0 {
				continue // nothing to be pending: it is duplicate-sent
			}
			b.Run(fmt.Sprintf("k=%d/%s", k, c.name), func(b *testing.B) {
				st, storeCalls, now := newStore(b)
				sender := &countingSender{}
				msgs := make([]Message, k)
				for i := range msgs {
					msgs[i] = Message{To: "sqs:https://sqs.us-east-1.amazonaws.com/123456789012/shipments", Body: fmt.Sprintf(`{"order":%d}`, i)}
				}
				p, err := NewConsumer(ConsumerConfig{
					Config: Config{Store: st, KeyPrefix: "bench", LocalCache: c.cache, Sender: sender, Logger: discardLogger, Test: TestConfig{Now: now}},
					Key:    KeyFunc(func(m events.SQSMessage) (string, error) { return m.Body, nil }),
				}, func(ctx context.Context, _ events.SQSMessage) error {
					if k == 0 {
						return nil
					}
					return Emit(ctx, msgs...)
				})
				if err != nil {
					b.Fatal(err)
				}
				run := fmt.Sprintf("%d-", time.Now().UnixNano()) // keys of this run alone, on a shared table
				handle := func(key string) {
					resp, err := p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{procRecord("m-"+key, run+key)}})
					if err != nil {
						b.Fatal(err)
					}
					if len(resp.BatchItemFailures) != 0 && !sender.refuse.Load() {
						b.Fatalf("record %s failed", key)
					}
				}
				if c.repeat {
					handle("repeated")
				}
				var calls, sends, sent int64
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					key := "repeated"
					if !c.repeat {
						key = fmt.Sprintf("key-%d", i)
					}
					if c.pending {
						b.StopTimer()
						sender.refuse.Store(true)
						handle(key)
						sender.refuse.Store(false)
						b.StartTimer()
					}
					calls0, sends0, sent0 := storeCalls(), sender.calls.Load(), sender.msgs.Load()
					handle(key)
					calls += storeCalls() - calls0
					sends += sender.calls.Load() - sends0
					sent += sender.msgs.Load() - sent0
				}
				b.StopTimer()
				n := float64(b.N)
				b.ReportMetric(float64(calls)/n, unit)
				b.ReportMetric(float64(sends)/n, "sends/record")
				b.ReportMetric(float64(sent)/n, "messages/record")
			})
		}
	}
}
