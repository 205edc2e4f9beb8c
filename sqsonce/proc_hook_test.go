package sqsonce

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/internal/testclock"
	"github.com/sqs-once/sqs-once/sqsonce/sqsoncetest"
	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// lockedBuffer is a log or metrics sink shared by concurrent invocations.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// With HashKeys the record, the logs and the outcome carry the key's hash,
// never the key; the handler still gets the key; keys past 1024 bytes
// work.
func TestHashKeysKeepKeysOutOfTableAndLogs(t *testing.T) {
	st := sqsoncetest.NewStore()
	var logs lockedBuffer
	var outs []Outcome
	var seen string
	const email = "alice@example.com"
	cfg := ConsumerConfig{
		Config: Config{
			Store:     st,
			KeyPrefix: "mail",
			HashKeys:  true,
			Logger:    slog.New(slog.NewTextHandler(&logs, nil)),
			OnOutcome: func(_ context.Context, o Outcome) { outs = append(outs, o) },
			Test:      TestConfig{Now: st.Now},
		},
		Key: KeyFromBody("/to"),
	}
	p, err := NewConsumer(cfg, func(ctx context.Context, _ events.SQSMessage) error { seen = Key(ctx); return nil })
	if err != nil {
		t.Fatal(err)
	}
	ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", Body: `{"to":"` + email + `"}`}}}
	if resp, err := p.Handle(context.Background(), ev); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle: %+v, %v", resp, err)
	}
	hash := HashKey(email)
	if len(hash) != 64 {
		t.Fatalf("HashKey is %q, want 64 hex digits", hash)
	}
	recs := st.Records()
	if _, ok := recs["mail#"+hash]; !ok || len(recs) != 1 {
		t.Errorf("records %v; want only mail#%s", recs, hash)
	}
	if strings.Contains(logs.String(), email) || !strings.Contains(logs.String(), hash) {
		t.Errorf("logs show the key or not its hash:\n%s", logs.String())
	}
	if len(outs) != 1 || outs[0].Key != hash {
		t.Errorf("outcomes %+v; want one with the hash as Key", outs)
	}
	if seen != email {
		t.Errorf("handler's Key(ctx) = %q, want the key itself", seen)
	}

	long := strings.Repeat("k", 5000)
	if err := p.Do(context.Background(), long, func(context.Context) error { return nil }); err != nil {
		t.Errorf("Do with a 5000-byte key and HashKeys: %v", err)
	}
	cfg.HashKeys = false
	plain, err := New(cfg.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.Do(context.Background(), long, func(context.Context) error { return nil }); !errors.Is(err, ErrNoKey) {
		t.Errorf("Do with a 5000-byte key without HashKeys: %v, want ErrNoKey", err)
	}
}

// Do under a context without a deadline takes a 30 s lock that it renews
// while fn runs; a process killed inside fn (no more renewals) frees its
// key 30 s later, not 15 minutes.
func TestDoWithoutDeadlineRenewsAShortLock(t *testing.T) {
	st := sqsoncetest.NewStore()
	clock := testclock.New(st.Now())
	cfg := Config{Store: st, KeyPrefix: "jobs", Test: TestConfig{Now: clock.Now}}
	p, err := newDo(cfg, deps{after: clock.After, sleep: lockNoSleep})
	if err != nil {
		t.Fatal(err)
	}
	start := clock.Now()
	running, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- p.Do(context.Background(), "nightly", func(context.Context) error {
			close(running)
			<-release
			return nil
		})
	}()
	<-running
	if rec := st.Records()["jobs#nightly"]; !rec.LockExpiresAt.Equal(start.Add(30 * time.Second)) {
		t.Fatalf("lock until %v, want 30 s from the start", rec.LockExpiresAt.Sub(start))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for range 4 { // 40 s of work: past the first lock's end
		if err := clock.WaitForWaiters(ctx, 1); err != nil {
			t.Fatal(err)
		}
		clock.Advance(10 * time.Second)
	}
	if err := clock.WaitForWaiters(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if rec := st.Records()["jobs#nightly"]; !rec.LockExpiresAt.Equal(clock.Now().Add(30 * time.Second)) {
		t.Errorf("after 40 s of work the lock ends %v from now, want 30 s (renewed every 10 s)", rec.LockExpiresAt.Sub(clock.Now()))
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// A job killed inside fn: its lock, never renewed again, ends 30 s on.
	killed := st.Records()["jobs#nightly"]
	killed.ID, killed.Status, killed.LockExpiresAt = "jobs#weekly", store.StatusProcessing, clock.Now().Add(30*time.Second)
	st.Put(killed)
	other, err := New(Config{Store: st, KeyPrefix: "jobs", Test: TestConfig{Now: clock.Now}})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Do(context.Background(), "weekly", func(context.Context) error { return nil }); !errors.Is(err, ErrInProgress) {
		t.Errorf("within 30 s of the kill: %v, want ErrInProgress", err)
	}
	clock.Advance(30*time.Second + time.Millisecond)
	if err := other.Do(context.Background(), "weekly", func(context.Context) error { return nil }); err != nil {
		t.Errorf("30 s after the kill: %v, want the key free", err)
	}
}

// Each record of a Handle and each Do is told once, with its fate.
func TestOnOutcomeTellsEachRecordOnce(t *testing.T) {
	st := sqsoncetest.NewStore()
	var outs []Outcome
	cfg := ConsumerConfig{
		Config: Config{
			Store:     st,
			KeyPrefix: "orders",
			Logger:    lockQuiet,
			OnOutcome: func(_ context.Context, o Outcome) { outs = append(outs, o) },
			Test:      TestConfig{Now: st.Now},
		},
		Key:            KeyFromBody("/id"),
		MaxConcurrency: 1,
	}
	boom := errors.New("downstream down")
	p, err := NewConsumer(cfg, func(_ context.Context, m events.SQSMessage) error {
		if strings.Contains(m.Body, "fail") {
			return boom
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := func(id, body string) events.SQSMessage { return events.SQSMessage{MessageId: id, Body: body} }
	if _, err := p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		rec("m-1", `{"id":"a"}`), rec("m-2", `{"id":"a"}`), rec("m-3", `{"id":"fail"}`), rec("m-4", `{}`),
	}}); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		msg, key string
		kind     Kind
		reason   Reason
	}{
		{"m-1", "a", KindProcessed, ""},
		{"m-2", "a", KindDuplicate, ""},
		{"m-3", "fail", KindFailed, ReasonHandlerError},
		{"m-4", "", KindFailed, ReasonNoKey},
	}
	if len(outs) != len(want) {
		t.Fatalf("%d outcomes, want %d: %+v", len(outs), len(want), outs)
	}
	for i, w := range want {
		o := outs[i]
		if o.MessageID != w.msg || o.Key != w.key || o.Kind != w.kind || o.Reason != w.reason {
			t.Errorf("outcome %d: %s %q %s/%s; want %s %q %s/%s", i, o.MessageID, o.Key, o.Kind, o.Reason, w.msg, w.key, w.kind, w.reason)
		}
	}
	if outs[0].Fence == 0 || outs[0].Err != nil || !errors.Is(outs[1].Err, ErrDuplicate) || !errors.Is(outs[2].Err, boom) || !errors.Is(outs[3].Err, ErrNoKey) {
		t.Errorf("fences and errors: %+v", outs)
	}

	outs = nil
	_ = p.Do(context.Background(), "job", func(context.Context) error { return nil })
	_ = p.Do(context.Background(), "job", func(context.Context) error { return nil })
	_ = p.Do(context.Background(), "", func(context.Context) error { return nil })
	if len(outs) != 3 || outs[0].Kind != KindProcessed || outs[0].MessageID != "" || outs[1].Kind != KindDuplicate || outs[2].Reason != ReasonNoKey {
		t.Errorf("Do outcomes: %+v", outs)
	}
}

// Many concurrent invocations on one Processor, as Lambda Managed
// Instances run them: every key's side effect once, every record told
// once, each invocation's metrics its own, the queue checked once.
func TestConcurrentHandleOnOneProcessor(t *testing.T) {
	st := sqsoncetest.NewStore()
	queues := newFakeQueues()
	url := queues.newQueue(t, false, nil)
	var metricsOut lockedBuffer
	var told atomic.Int64
	kinds := sync.Map{} // message id -> kind
	var effects sync.Map
	cfg := ConsumerConfig{
		Config: Config{
			Store:      st,
			KeyPrefix:  "orders",
			LocalCache: 100,
			Logger:     lockQuiet,
			OnOutcome: func(_ context.Context, o Outcome) {
				told.Add(1)
				if _, dup := kinds.LoadOrStore(o.MessageID, o.Kind); dup {
					t.Errorf("message %s told twice", o.MessageID)
				}
			},
			Test: TestConfig{Now: st.Now, Rand: func() float64 { return 0.5 }},
		},
		Key:          KeyFromBody("/orderId"),
		AWS:          awsOffline(),
		QueueURL:     url,
		Metrics:      &metricsOut,
		FunctionName: "fn",
	}
	p, err := newProcessor(cfg, func(ctx context.Context, m events.SQSMessage) error {
		n, _ := effects.LoadOrStore(Key(ctx), new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		return nil
	}, deps{sqs: queues})
	if err != nil {
		t.Fatal(err)
	}
	const invocations, perBatch, keys = 40, 5, 30
	var wg sync.WaitGroup
	for inv := range invocations {
		wg.Go(func() {
			var recs []events.SQSMessage
			for r := range perBatch {
				ev := queues.event(t, url, fmt.Sprintf(`{"orderId":"o-%d"}`, (inv*perBatch+r)%keys))
				m := ev.Records[0]
				m.MessageId = fmt.Sprintf("m-%d-%d", inv, r)
				recs = append(recs, m)
			}
			resp, err := p.Handle(context.Background(), events.SQSEvent{Records: recs})
			if err != nil {
				t.Error(err)
				return
			}
			for _, f := range resp.BatchItemFailures {
				if k, _ := kinds.Load(f.ItemIdentifier); k != KindInProgress {
					t.Errorf("record %s failed as %v; only a key in progress in another invocation may be retried", f.ItemIdentifier, k)
				}
			}
		})
	}
	wg.Wait()

	if got := told.Load(); got != invocations*perBatch {
		t.Errorf("%d outcomes told, want %d", got, invocations*perBatch)
	}
	processed := 0
	kinds.Range(func(_, k any) bool {
		if k == KindProcessed {
			processed++
		}
		return true
	})
	ran := 0
	effects.Range(func(k, n any) bool {
		ran++
		if c := n.(*atomic.Int32).Load(); c != 1 {
			t.Errorf("key %v: side effect ran %d times", k, c)
		}
		return true
	})
	if ran != keys || processed != keys {
		t.Errorf("%d keys ran, %d records processed; want %d each", ran, processed, keys)
	}
	// One EMF document per invocation, each counting its own batch.
	docs := 0
	for line := range strings.Lines(metricsOut.String()) {
		var doc map[string]any
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		if _, ok := doc["_aws"]; ok && doc["Reason"] == nil {
			docs++
			sum := 0.0
			for _, m := range []string{string(KindProcessed), string(KindDuplicate), string(KindInProgress)} {
				v, _ := doc[m].(float64)
				sum += v
			}
			if sum != perBatch {
				t.Errorf("an invocation's metrics count %v records, want its %d: %s", sum, perBatch, line)
			}
		}
	}
	if docs != invocations {
		t.Errorf("%d metric documents without a Reason, want one per invocation (%d)", docs, invocations)
	}
	queues.mu.Lock()
	checks := queues.attributeReads
	queues.mu.Unlock()
	if got := checks; got != 1 {
		t.Errorf("queue checked %d times, want once per process", got)
	}
}
