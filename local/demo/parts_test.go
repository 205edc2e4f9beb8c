package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
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
			if err := l.Append(context.Background(), Entry{Key: fmt.Sprintf("k%d", i)}); err != nil {
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
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestLedgerRefusesPastTheDeadline: an invocation abandoned at its timeout
// keeps running in this process, but must not make a side effect Lambda
// would never have let it make.
func TestLedgerRefusesPastTheDeadline(t *testing.T) {
	t.Parallel()
	l, err := OpenLedger(filepath.Join(t.TempDir(), "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Append(ctx, Entry{Key: "k"}); !errors.Is(err, context.Canceled) || l.Count() != 0 {
		t.Errorf("Append after the deadline: %v, %d entries; want context.Canceled and none", err, l.Count())
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
			if err := b.biz.Handle(ctx, m); !errors.Is(err, errPoison) || sqsonce.IsPermanent(err) {
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
		if err := b.biz.Handle(ctx, b.msg(Permanent)); !sqsonce.IsPermanent(err) {
			t.Errorf("permanent key: %v", err)
		}
	})
	t.Run("unparsable body is permanent", func(t *testing.T) {
		t.Parallel()
		b := setupBusiness(t, WorkloadSpec{Keys: 1, MaxReceiveCount: 3})
		if err := b.biz.Handle(ctx, events.SQSMessage{Body: "{"}); !sqsonce.IsPermanent(err) {
			t.Errorf("bad body: %v", err)
		}
	})
}

// TestBusinessCrashHangsAfterTheSideEffect: the side effect is recorded, then
// the call does not return (no completion, no release) until the run ends.
// In a synctest bubble, synctest.Wait shows the call blocked, without a
// polling loop.
func TestBusinessCrashHangsAfterTheSideEffect(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setupBusiness(t, WorkloadSpec{Keys: 3, Crash: 1, MaxReceiveCount: 3})
		b.wantCrash = true
		m := b.msg(Normal)
		returned := make(chan error, 1)
		go func() { returned <- b.biz.Handle(context.Background(), m) }()
		synctest.Wait()
		select {
		case err := <-returned:
			t.Fatalf("crashed call returned %v before the run ended", err)
		default:
		}
		if b.ledger.Count() != 1 {
			t.Fatalf("%d side effects before the crash, want 1", b.ledger.Count())
		}
		b.biz.Release()
		if err := <-returned; !errors.Is(err, errCrashed) {
			t.Errorf("released crash returned %v", err)
		}
		// The redelivery runs normally and records a second side effect.
		if err := b.biz.Handle(context.Background(), m); err != nil || b.ledger.Count() != 2 {
			t.Errorf("redelivery: %v, %d side effects", err, b.ledger.Count())
		}
	})
}

// TestCompletionObserver: the completion writes of the real lock protocol
// are reported with their key and invocation, accepted or not; its other
// writes are not.
func TestCompletionObserver(t *testing.T) {
	t.Parallel()
	w, err := NewWorkload(WorkloadSpec{Keys: 2, MaxReceiveCount: 1}, 1, "r")
	if err != nil {
		t.Fatal(err)
	}
	api := &fakeDynamo{}
	var got []Completion
	obs := newCompletionObserver(api, "fn", w, func(c Completion) { got = append(got, c) })
	st := dynamostore.New(obs, "table")
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	now := time.Now()

	lease, err := st.Acquire(ctx, store.AcquireRequest{ID: store.RecordID("fn", w.Keys[0].ID), Owner: "o", Now: now, LockUntil: now.Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Complete(ctx, lease, store.Completion{Until: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	api.updateErr = errors.New("throttled")
	_ = st.Complete(ctx, store.Lease{ID: store.RecordID("fn", w.Keys[1].ID), Owner: "o"}, store.Completion{Until: now.Add(time.Hour)})
	_ = st.Complete(ctx, store.Lease{ID: store.RecordID("fn", "not-in-the-workload"), Owner: "o"}, store.Completion{Until: now.Add(time.Hour)})
	_ = st.Release(ctx, lease, now)

	if len(got) != 2 || got[0].Key != w.Keys[0].ID || !got[0].OK || got[0].RequestID != "req-1" || got[0].At.Before(now) ||
		got[1].Key != w.Keys[1].ID || got[1].OK {
		t.Errorf("completions %+v, want %s accepted and %s refused, both by req-1", got, w.Keys[0].ID, w.Keys[1].ID)
	}
}

// fakeDynamo accepts every write, or fails UpdateItem with updateErr and
// TransactWriteItems with txErr, and holds no item.
type fakeDynamo struct{ updateErr, txErr error }

var _ txAPI = (*fakeDynamo)(nil)

func (f *fakeDynamo) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return &dynamodb.TransactWriteItemsOutput{}, f.txErr
}

func (f *fakeDynamo) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return &dynamodb.UpdateItemOutput{}, f.updateErr
}

func (f *fakeDynamo) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{}, nil
}

func (f *fakeDynamo) DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return &dynamodb.DeleteItemOutput{}, nil
}

func (f *fakeDynamo) Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return &dynamodb.ScanOutput{}, nil
}

// TestPartitionedRoutesEachItemToOnePartition: the processor's every call on
// an item (UpdateItem, GetItem, DeleteItem) reaches the partition of the
// item's id, the same one each time; a Scan, which would see one partition
// as the whole table, is refused.
func TestPartitionedRoutesEachItemToOnePartition(t *testing.T) {
	t.Parallel()
	calls := make([]*partitionCalls, dynamoPartitions)
	parts := make(partitioned, dynamoPartitions)
	for i := range parts {
		calls[i] = &partitionCalls{ids: map[string][]string{}}
		parts[i] = calls[i]
	}
	ctx := context.Background()
	for i := range 20 {
		id := store.RecordID("p", fmt.Sprintf("order-%05d", i))
		key := map[string]ddbtypes.AttributeValue{dynamostore.AttrID: &ddbtypes.AttributeValueMemberS{Value: id}}
		_, _ = parts.UpdateItem(ctx, &dynamodb.UpdateItemInput{Key: key})
		_, _ = parts.GetItem(ctx, &dynamodb.GetItemInput{Key: key})
		_, _ = parts.DeleteItem(ctx, &dynamodb.DeleteItemInput{Key: key})
		// -tx's commit: the business item first, keyed otherwise, then
		// the record's update, whose partition the transaction must reach.
		_, _ = parts.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
			{Put: &ddbtypes.Put{Item: effectItem(Entry{Key: id, Seq: i})}},
			{Update: &ddbtypes.Update{Key: key}},
		}})
	}
	seen := map[string]int{}
	for i, c := range calls {
		if len(c.ids) == 0 {
			t.Errorf("partition %d got no call: the items are not spread", i)
		}
		for id, ops := range c.ids {
			seen[id]++
			if !slices.Equal(ops, []string{"UpdateItem", "GetItem", "DeleteItem", "TransactWriteItems"}) {
				t.Errorf("partition %d got %v for %s, want all four calls of the item", i, ops, id)
			}
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s reached %d partitions, want 1", id, n)
		}
	}
	if len(seen) != 20 {
		t.Errorf("%d items routed, want 20", len(seen))
	}
	if _, err := parts.Scan(ctx, &dynamodb.ScanInput{}); !errors.Is(err, errScanPartitioned) {
		t.Errorf("Scan: %v, want it refused", err)
	}
}

// partitionCalls records the calls each item's id reached it with.
type partitionCalls struct {
	fakeDynamo
	ids map[string][]string
}

func (p *partitionCalls) add(op string, key map[string]ddbtypes.AttributeValue) {
	p.ids[recordID(key)] = append(p.ids[recordID(key)], op)
}

func (p *partitionCalls) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	p.add("UpdateItem", in.Key)
	return p.fakeDynamo.UpdateItem(ctx, in, o...)
}

func (p *partitionCalls) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	p.add("GetItem", in.Key)
	return p.fakeDynamo.GetItem(ctx, in, o...)
}

func (p *partitionCalls) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	for _, it := range in.TransactItems {
		if it.Update != nil {
			p.add("TransactWriteItems", it.Update.Key)
		}
	}
	return p.fakeDynamo.TransactWriteItems(ctx, in, o...)
}

func (p *partitionCalls) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	p.add("DeleteItem", in.Key)
	return p.fakeDynamo.DeleteItem(ctx, in, o...)
}

// TestTrackerOperatorArrivals: the same SQS message received twice (its
// delete failed) is one arrival; the same send as another message is two.
func TestTrackerOperatorArrivals(t *testing.T) {
	t.Parallel()
	tr := NewTracker()
	tr.AtOperator(Arrival{Send: "s1", MessageID: "m1"})
	tr.AtOperator(Arrival{Send: "s1", MessageID: "m1"})
	tr.AtOperator(Arrival{Send: "s2", MessageID: "m2"})
	tr.AtOperator(Arrival{Send: "s2", MessageID: "m3"})
	tr.Foreign("x")
	tr.Foreign("x")
	obs := tr.Snapshot()
	if len(obs.Operator["s1"]) != 1 || len(obs.Operator["s2"]) != 2 || obs.Foreign != 1 {
		t.Errorf("arrivals %v, foreign %d; want s1 once, s2 twice, 1 foreign", obs.Operator, obs.Foreign)
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
	if want := "5/10 messages done · 4 processed · 1 duplicate suppressed · 2 dead-lettered · 3 replays · 1 at operator"; !strings.Contains(lines[0], want) {
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

// fakeOperatorQueue is a deployed operator queue holding another producer's
// message, visible again at every receive, and once this run's message.
type fakeOperatorQueue struct {
	queueAPI
	cancel   context.CancelFunc
	mine     string
	receives int
	hidden   []int32
	deleted  []string
}

func (f *fakeOperatorQueue) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.receives++
	if f.receives > 1000 {
		f.cancel() // a spinning watcher never lets the bubble's clock advance
	}
	f.hidden = append(f.hidden, in.VisibilityTimeout)
	out := &sqs.ReceiveMessageOutput{Messages: []sqstypes.Message{{MessageId: aws.String("foreign-1"), ReceiptHandle: aws.String("rh-foreign"), Body: aws.String(`{"orderId":"theirs"}`)}}}
	if f.receives == 3 {
		out.Messages = append(out.Messages, sqstypes.Message{MessageId: aws.String("mine-1"), ReceiptHandle: aws.String("rh-mine"), Body: aws.String(f.mine),
			MessageAttributes: map[string]sqstypes.MessageAttributeValue{"sqs-once-reason": {DataType: aws.String("String"), StringValue: aws.String("max-attempts")}}})
	}
	return out, nil
}

func (f *fakeOperatorQueue) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	for _, e := range in.Entries {
		f.deleted = append(f.deleted, aws.ToString(e.ReceiptHandle))
	}
	return &sqs.DeleteMessageBatchOutput{}, nil
}

// TestWatchOperatorSamplesASharedQueue: against a deployed operator queue,
// other producers' messages are counted and left alone (never deleted, never
// made visible again early), and a queue holding only them is received from
// a few times a minute, not in a loop. This run's message is recorded and
// deleted. The minute passes on a synctest bubble's clock.
func TestWatchOperatorSamplesASharedQueue(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w, err := NewWorkload(WorkloadSpec{Keys: 2, MaxReceiveCount: 1}, 1, "run")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		api := &fakeOperatorQueue{cancel: cancel, mine: w.Body(w.Sends[0], Normal, false)}
		r := &stackRun{info: &stackInfo{opURL: "https://sqs/operator"}, api: api, w: w, tracker: NewTracker()}
		r.watchOperator(ctx)

		if api.receives > 15 {
			t.Errorf("%d receives in a minute from a queue of other producers' messages, want a few", api.receives)
		}
		obs := r.tracker.Snapshot()
		if obs.Foreign != 1 || len(obs.Operator[w.Sends[0].ID]) != 1 || obs.Operator[w.Sends[0].ID][0].Reason != "max-attempts" {
			t.Errorf("foreign %d, arrivals %v; want the other message counted once and this run's recorded", obs.Foreign, obs.Operator)
		}
		if !slices.Equal(api.deleted, []string{"rh-mine"}) {
			t.Errorf("deleted %v, want only this run's message", api.deleted)
		}
		for _, v := range api.hidden {
			if v != int32(peekVisibility/time.Second) {
				t.Errorf("received with visibility timeout %d s, want %s", v, peekVisibility)
			}
		}
	})
}
