package demo

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
	"github.com/sqs-once/sqs-once/sqsonce/store/memstore"
)

// TestTransactionalBusinessCrashCommitsNothing: with -tx a crash key's
// first invocation stages its side effect and crashes before the commit:
// nothing of it is committed, and the retry commits one effect, where the
// plain handler's ledger has two (TestBusinessCrashHangsAfterTheSideEffect).
// The processor runs on the in-memory transactional store, which keeps
// the business table's items dynamostore.Add staged, as committed or not.
func TestTransactionalBusinessCrashCommitsNothing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupBusiness(t, WorkloadSpec{Keys: 3, Crash: 1, MaxReceiveCount: 3})
		b.biz = NewTransactionalBusiness(b.ledger, &effectTable{name: "effects"}, b.w)
		b.wantCrash = true
		st := memstore.New()
		p, err := sqsonce.NewConsumer(sqsonce.ConsumerConfig{
			Config: sqsonce.Config{Store: st, KeyPrefix: "demo", LockTimeout: time.Minute, Logger: slog.New(slog.DiscardHandler), Test: sqsonce.TestConfig{Now: st.Now}},
			Key:    sqsonce.KeyFromBody("/orderId"),
		}, b.biz.Handle)
		if err != nil {
			t.Fatal(err)
		}
		m := b.msg(Normal)
		key := b.w.Sends[0].Key
		for _, s := range b.w.Sends {
			if "m-"+s.ID == m.MessageId {
				key = s.Key
			}
		}
		ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
		returned := make(chan events.SQSEventResponse, 1)
		go func() {
			resp, _ := p.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{m}})
			returned <- resp
		}()
		synctest.Wait()
		if b.ledger.Count() != 1 {
			t.Fatalf("%d side effects staged before the crash, want 1", b.ledger.Count())
		}
		b.biz.Release()
		if resp := <-returned; len(resp.BatchItemFailures) != 1 {
			t.Fatalf("crashed invocation answered %+v, want its record failed", resp)
		}
		if c := st.Committed(); len(c) != 0 {
			t.Fatalf("committed after the crash: %v, want nothing", c)
		}
		if resp, err := p.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{m}}); err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("retry: %+v, %v", resp, err)
		}
		writes := st.Committed()[store.RecordID("demo", key)]
		if len(writes) != 1 || b.ledger.Count() != 2 {
			t.Fatalf("committed %v with %d staged, want the retry's one effect of two staged", writes, b.ledger.Count())
		}
		put := writes[0].(ddbtypes.TransactWriteItem).Put
		e, err := entryOf(put.Item)
		if err != nil || *put.TableName != "effects" || e.Key != key || e.Seq != 2 || e.Crash || e.RequestID != "req-1" {
			t.Errorf("committed effect %+v (%v) in %s, want %s's second, not the crash's", e, err, *put.TableName, key)
		}
	})
}

// TestEffectItemRoundTrips: the report reads back what the handler wrote.
func TestEffectItemRoundTrips(t *testing.T) {
	t.Parallel()
	e := Entry{Seq: 7, At: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Key: "order-1", Send: "s1", MessageID: "m", RequestID: "r", ReceiveCount: "2", ReplayCount: "1", Crash: true}
	got, err := entryOf(effectItem(e))
	if err != nil || got != e {
		t.Errorf("entryOf(effectItem(%+v)) = %+v, %v", e, got, err)
	}
	if _, err := entryOf(map[string]ddbtypes.AttributeValue{}); err == nil {
		t.Error("an item without a number read as an effect")
	}
}

// TestCompletionObserverSeesTransactions: -tx's completion is the record's
// update inside TransactWriteItems, reported as UpdateItem's is.
func TestCompletionObserverSeesTransactions(t *testing.T) {
	t.Parallel()
	w, err := NewWorkload(WorkloadSpec{Keys: 2, MaxReceiveCount: 1}, 1, "r")
	if err != nil {
		t.Fatal(err)
	}
	api := &fakeDynamo{}
	var got []Completion
	obs := newCompletionObserver(api, "fn", w, func(c Completion) { got = append(got, c) })
	st := dynamostore.NewTransactional(obs, "table")
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	now := time.Now()
	commit := func(key string) error {
		lease, err := st.Acquire(ctx, store.AcquireRequest{ID: store.RecordID("fn", key), Owner: "o", Now: now, LockUntil: now.Add(time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		tx := st.Begin(lease)
		table := &effectTable{name: "effects"}
		if err := table.stage(store.ContextWithTx(ctx, tx), Entry{Key: key, Seq: 1, At: now}); err != nil {
			t.Fatal(err)
		}
		return tx.Commit(ctx, store.Completion{Until: now.Add(time.Hour)})
	}
	if err := commit(w.Keys[0].ID); err != nil {
		t.Fatal(err)
	}
	api.txErr = errors.New("throttled")
	if err := commit(w.Keys[1].ID); err == nil {
		t.Fatal("a refused commit returned nil")
	}
	if len(got) != 2 || got[0].Key != w.Keys[0].ID || !got[0].OK || got[0].RequestID != "req-1" ||
		got[1].Key != w.Keys[1].ID || got[1].OK {
		t.Errorf("completions %+v, want %s accepted and %s refused, both by req-1", got, w.Keys[0].ID, w.Keys[1].ID)
	}
}

// TestSummarizeTransactional: with -tx a key's second committed effect is
// a violation, whatever the invocations did (no window explains it), the
// staged effects that never committed are counted, and the crashed
// invocations are known from the staged effects.
func TestSummarizeTransactional(t *testing.T) {
	t.Parallel()
	w, err := NewWorkload(WorkloadSpec{Keys: 3, Crash: 1, MaxReceiveCount: 3}, 1, "r")
	if err != nil {
		t.Fatal(err)
	}
	var crashKey, other string
	for _, k := range w.Keys {
		if k.Crash {
			crashKey = k.ID
		} else if other == "" {
			other = k.ID
		}
	}
	t0 := time.Now()
	staged := []Entry{
		{Seq: 1, Key: crashKey, RequestID: "crashed", Crash: true, At: t0},
		{Seq: 2, Key: crashKey, RequestID: "retry", At: t0.Add(10 * time.Second)},
	}
	committed := []Entry{staged[1]}
	var seq = 3
	for _, k := range w.Keys {
		if k.ID != crashKey {
			e := Entry{Seq: seq, Key: k.ID, RequestID: "inv", At: t0}
			staged, committed, seq = append(staged, e), append(committed, e), seq+1
		}
	}
	obs := Observed{Invocations: map[string]InvocationInfo{
		"crashed": {Started: t0, Abandoned: true, Duration: 10 * time.Second},
		"retry":   {Started: t0.Add(10 * time.Second)},
		"inv":     {Started: t0},
	}}
	ev := Evaluation{Mode: "local", LockHold: 6 * time.Second, Transactional: &Transactional{Table: "effects", Staged: staged}}
	s := Summarize(w, committed, obs, ev)
	if s.SideEffects.Multiple != 0 || s.SideEffects.ExactlyOnce != 3 || s.Transactional.Uncommitted != 1 || s.Transactional.CrashedUncommitted != 1 || s.Invocations.TimedOutCrash != 1 {
		t.Errorf("side effects %+v, tx %+v, invocations %+v", s.SideEffects, s.Transactional, s.Invocations)
	}
	for _, v := range s.Violations {
		if strings.Contains(v, "side effects committed") {
			t.Errorf("violation %q with every key once", v)
		}
	}
	if out := s.Render(); !strings.Contains(out, "  more than once      0 keys  [ok]") || !strings.Contains(out, "1 never committed, 1 of them by an invocation the demo crashed") {
		t.Errorf("report:\n%s", out)
	}

	// The same run with the crash's effect committed as well: the
	// duplicate the transaction exists to prevent.
	s = Summarize(w, append(committed, staged[0]), obs, ev)
	if s.SideEffects.Multiple != 1 || !strings.Contains(strings.Join(s.Violations, "\n"), "key "+crashKey+": 2 side effects committed") {
		t.Errorf("a key committed twice: %+v, violations %q", s.SideEffects, s.Violations)
	}
	if out := s.Render(); !strings.Contains(out, "  more than once      1 key  [FAIL]") {
		t.Errorf("report:\n%s", out)
	}
}

// TestCommittedRecord: -chaos names the record of a faulted -tx commit, as
// it does a faulted COMPLETED UpdateItem, from the request as the SDK
// sends it; a transaction that completes nothing names none.
func TestCommittedRecord(t *testing.T) {
	t.Parallel()
	body := `{"ClientRequestToken":"t","TransactItems":[
{"Put":{"TableName":"effects","Item":{"key":{"S":"order-1"},"seq":{"N":"3"},"crash":{"BOOL":false}}}},
{"Update":{"TableName":"records","Key":{"id":{"S":"fn#order-1"}},"ExpressionAttributeValues":{":f":{"N":"7"},":s":{"S":"COMPLETED"},":n":{"NULL":true}}}}]}`
	if got := committedRecord([]byte(body)); got != "fn#order-1" {
		t.Errorf("committedRecord = %q, want fn#order-1", got)
	}
	if got := committedRecord([]byte(strings.Replace(body, "COMPLETED", "RELEASED", 1))); got != "" {
		t.Errorf("a transaction that completes nothing named %q", got)
	}
}
