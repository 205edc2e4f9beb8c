package processor_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/processor"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
)

func TestConcurrentDeliveriesRunBusinessOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *processor.Config) { c.Key, _ = processor.ParseKeySource("body:/orderId") })
	// A producer's retry and SQS's own redelivery: several messages, one
	// order, handled by several Lambda instances at once.
	const instances = 8
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range instances {
		h := b.newHandler(t)
		wg.Go(func() {
			<-start
			msg := record(ids("m", instances)[i], `{"orderId":"o-1"}`)
			if _, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg}}); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	if got := b.business.Calls(); len(got) != 1 {
		t.Fatalf("business ran %d times (%v) for one order delivered %d times concurrently, want 1", len(got), got, instances)
	}
}

func TestDuplicateIsReportedDoneWithoutRunning(t *testing.T) {
	t.Parallel()
	b := setup(t)
	msg := record("m-1", "hello")
	if failed := b.handle(t, msg); len(failed) != 0 {
		t.Fatalf("first delivery failed: %v", failed)
	}
	if failed := b.handle(t, msg); len(failed) != 0 {
		t.Fatalf("duplicate reported failed: %v; SQS would redeliver it forever", failed)
	}
	if got := b.business.Calls(); len(got) != 1 {
		t.Errorf("business ran %d times, want 1", len(got))
	}
}

func TestInProgress(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{processor.InProgressRetry, processor.InProgressDrop} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(c *processor.Config) { c.InProgress = policy })
			// The first holder is still running when the redelivery arrives.
			release := make(chan struct{})
			entered := make(chan struct{})
			b.business.hook = func(_ context.Context, msg events.SQSMessage) {
				if msg.ReceiptHandle == "first" {
					close(entered)
					<-release
				}
			}
			first := record("m-1", "x", func(m *events.SQSMessage) { m.ReceiptHandle = "first" })
			done := make(chan []string)
			go func() { done <- b.handle(t, first) }()
			<-entered

			failed := b.handle(t, record("m-1", "x"))
			want := []string{"m-1"}
			if policy == processor.InProgressDrop {
				want = []string{}
			}
			if !slices.Equal(failed, want) {
				t.Errorf("redelivery while in progress: failed %v, want %v", failed, want)
			}
			close(release)
			<-done
			if got := b.business.Calls(); len(got) != 1 {
				t.Errorf("business ran %d times, want 1", len(got))
			}
		})
	}
}

func TestExpiredLockIsTakenOver(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A holder dies between its side effect and its completion: the record
	// stays PROCESSING under its 60 s lock.
	b.dynamo.fail = map[string]error{"complete": errors.New("process killed")}
	b.handle(t, record("m-1", "x"))
	b.dynamo.fail = nil

	if failed := b.handle(t, record("m-1", "x")); !slices.Equal(failed, []string{"m-1"}) {
		t.Fatalf("redelivery within the lock: failed %v, want [m-1]", failed)
	}
	b.clock.Advance(61 * time.Second)
	if failed := b.handle(t, record("m-1", "x")); len(failed) != 0 {
		t.Fatalf("redelivery after the lock expired: failed %v, want taken over and done", failed)
	}
	if got := b.business.Calls(); len(got) != 2 {
		t.Errorf("business ran %d times, want 2: once by the dead holder, once by the takeover", len(got))
	}
}

func TestKeySourcesGuardTheRightKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		source       string
		first, again events.SQSMessage
		key          string
	}{
		{"body JSON pointer: a producer's re-send has a new messageId", "body:/order/id",
			record("m-1", `{"order":{"id":"o-7"}}`), record("m-2", `{"order":{"id":"o-7"},"retry":true}`), "o-7"},
		{"attribute", "attribute:idempotency-key",
			record("m-1", "a", withAttr("idempotency-key", "String", "k-1")), record("m-2", "b", withAttr("idempotency-key", "String", "k-1")), "k-1"},
		{"replayed dead letter keyed by its original messageId", "messageId",
			record("m-1", "a"), record("m-replayed", "a", withAttr(sqsmsg.AttrOriginalMessageID, "String", "m-1")), "m-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(c *processor.Config) { c.Key, _ = processor.ParseKeySource(tt.source) })
			var seen []string // what the business handler is told its key is
			b.business.hook = func(ctx context.Context, _ events.SQSMessage) { seen = append(seen, processor.IdempotencyKey(ctx)) }
			if failed := b.handle(t, tt.first); len(failed) != 0 {
				t.Fatalf("first: failed %v", failed)
			}
			if failed := b.handle(t, tt.again); len(failed) != 0 {
				t.Fatalf("second: failed %v", failed)
			}
			if got := b.business.Calls(); !slices.Equal(got, []string{tt.first.MessageId}) {
				t.Errorf("business calls %v, want only %s: the second message has the same key", got, tt.first.MessageId)
			}
			if !slices.Equal(seen, []string{tt.key}) {
				t.Errorf("IdempotencyKey(ctx) in the business handler = %v, want [%s]", seen, tt.key)
			}
		})
	}
}

func TestMissingKeyFailsWithoutRunning(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *processor.Config) { c.Key, _ = processor.ParseKeySource("body:/orderId") })
	failed := b.handle(t, record("no-key", `{"other":1}`), record("not-json", `orderId=1`), record("ok", `{"orderId":1}`))
	if !slices.Equal(failed, []string{"no-key", "not-json"}) {
		t.Errorf("failed %v, want [no-key not-json]", failed)
	}
	if got := b.business.Calls(); !slices.Equal(got, []string{"ok"}) {
		t.Errorf("business calls %v: a record without its key must never run unguarded", got)
	}
	if b.dynamo.total() != 2 {
		t.Errorf("%d DynamoDB calls, want 2 (only the keyed record)", b.dynamo.total())
	}
	logs := b.logs.String()
	for _, id := range []string{"no-key", "not-json"} {
		if !strings.Contains(logs, `"level":"ERROR","msg":"record not processed: no idempotency key`) ||
			!strings.Contains(logs, `"messageId":"`+id+`"`) {
			t.Errorf("no error line naming %s and the missing key:\n%s", id, logs)
		}
	}
}

func TestDynamoDBCallsPerRecord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.business.errs["bad"] = errors.New("downstream 503")
	tests := []struct {
		name string
		msg  events.SQSMessage
		want int
	}{
		{"new message: acquire, complete", record("new", "x"), 2},
		{"duplicate: acquire refused", record("new", "x"), 1},
		{"failure: acquire, release", record("bad", "x"), 2},
	}
	for _, tt := range tests { // sequential: each step builds on the last
		b.dynamo.reset()
		b.handle(t, tt.msg)
		if got := b.dynamo.total(); got != tt.want {
			t.Errorf("%s: %d DynamoDB calls, want %d", tt.name, got, tt.want)
		}
	}
}

func TestUnavailableStoreLeavesRecordFailedAndUnrun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.dynamo.fail = map[string]error{"acquire": &types.ProvisionedThroughputExceededException{Message: new("throttled")}}
	if failed := b.handle(t, record("m-1", "x"), record("m-2", "y")); !slices.Equal(failed, []string{"m-1", "m-2"}) {
		t.Errorf("failed %v, want both records", failed)
	}
	if got := b.business.Calls(); len(got) != 0 {
		t.Errorf("business ran %v without the lock", got)
	}
}

func TestUnrecordedCompletionReportsSuccess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.dynamo.fail = map[string]error{"complete": &types.InternalServerError{}}
	// The side effect happened: retrying the message would repeat it.
	if failed := b.handle(t, record("m-1", "x")); len(failed) != 0 {
		t.Errorf("failed %v, want the record reported done", failed)
	}
	if got := b.dynamo.updates.Load(); got < 3 {
		t.Errorf("completion written %d times, want retries", got)
	}
	if logs := b.logs.String(); !strings.Contains(logs, `"level":"ERROR"`) || !strings.Contains(logs, "duplicate possible") {
		t.Errorf("no error line saying a duplicate is possible:\n%s", logs)
	}
}

func TestBusinessFailureAndPanicAreRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.business.errs["bad"] = errors.New("boom")
	b.business.hook = func(_ context.Context, msg events.SQSMessage) {
		if msg.MessageId == "panics" {
			panic("nil map")
		}
	}
	failed := b.handle(t, record("ok", "x"), record("bad", "x"), record("panics", "x"))
	slices.Sort(failed)
	if !slices.Equal(failed, []string{"bad", "panics"}) {
		t.Fatalf("failed %v, want [bad panics]", failed)
	}
	// Both locks were released, so the retry runs at once.
	b.business.errs = map[string]error{}
	b.business.hook = nil
	if failed := b.handle(t, record("bad", "x"), record("panics", "x")); len(failed) != 0 {
		t.Errorf("retry failed %v: locks were not released", failed)
	}
}

func TestStandardBatchRunsConcurrently(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Every call waits until all ten are running: a sequential handler could
	// never get past the first.
	const n = 10
	var arrived sync.WaitGroup
	arrived.Add(n)
	allIn := make(chan struct{})
	go func() { arrived.Wait(); close(allIn) }()
	b.business.hook = func(context.Context, events.SQSMessage) {
		arrived.Done()
		select {
		case <-allIn:
		case <-time.After(10 * time.Second):
		}
	}
	var records []events.SQSMessage
	for _, id := range ids("m", n) {
		records = append(records, record(id, "x"))
	}
	b.handle(t, records...)
	select {
	case <-allIn:
	default:
		t.Fatal("the ten records of a standard batch did not run concurrently")
	}
}

func TestMaxConcurrencyBoundsParallelRecords(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *processor.Config) { c.MaxConcurrency = 3 })
	var mu sync.Mutex
	running, peak := 0, 0
	b.business.hook = func(context.Context, events.SQSMessage) {
		mu.Lock()
		running++
		peak = max(peak, running)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // overlap, not timing: peak is what is checked
		mu.Lock()
		running--
		mu.Unlock()
	}
	var records []events.SQSMessage
	for _, id := range ids("m", 12) {
		records = append(records, record(id, "x"))
	}
	b.handle(t, records...)
	if peak > 3 {
		t.Errorf("%d records ran at once, want at most MAX_CONCURRENCY=3", peak)
	}
}

func TestFIFOGroupsRunInOrderAndStopAtFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.business.errs["a2"] = errors.New("boom")
	// Groups a and b each wait for the other to start: they must run in
	// parallel, while the records within a group run in order.
	var started sync.WaitGroup
	started.Add(2)
	bothIn := make(chan struct{})
	go func() { started.Wait(); close(bothIn) }()
	b.business.hook = func(_ context.Context, msg events.SQSMessage) {
		if msg.MessageId == "a1" || msg.MessageId == "b1" {
			started.Done()
			select {
			case <-bothIn:
			case <-time.After(10 * time.Second):
				t.Error("groups a and b did not run in parallel")
			}
		}
	}
	records := []events.SQSMessage{
		record("a1", "x", fifo("a")), record("b1", "x", fifo("b")), record("a2", "x", fifo("a")),
		record("b2", "x", fifo("b")), record("a3", "x", fifo("a")), record("b3", "x", fifo("b")),
	}
	failed := b.handle(t, records...)
	if !slices.Equal(failed, []string{"a2", "a3"}) {
		t.Errorf("failed %v, want [a2 a3]: a3 must not run after a2 failed", failed)
	}
	var a, bGroup []string
	for _, id := range b.business.Calls() {
		if id[0] == 'a' {
			a = append(a, id)
		} else {
			bGroup = append(bGroup, id)
		}
	}
	if !slices.Equal(a, []string{"a1", "a2"}) || !slices.Equal(bGroup, []string{"b1", "b2", "b3"}) {
		t.Errorf("group a ran %v, b ran %v; want [a1 a2] and [b1 b2 b3] in order", a, bGroup)
	}
}

func TestHandlerSlowerThanItsLock(t *testing.T) {
	t.Parallel()
	b := setup(t) // LOCK_TIMEOUT 60 s
	// The first holder outlives its lock; meanwhile another instance takes
	// the key over and runs it too (documented window 3). The first must
	// then neither overwrite the new holder's record nor ask for a retry,
	// which would run the handler a third time.
	second := b.newHandler(t)
	var slowHolder atomic.Bool
	b.business.hook = func(context.Context, events.SQSMessage) {
		if !slowHolder.CompareAndSwap(false, true) {
			return // the takeover's own run
		}
		b.clock.Advance(61 * time.Second)
		if resp, _ := second.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("m-1", "x")}}); len(resp.BatchItemFailures) != 0 {
			t.Errorf("takeover of the expired lock failed: %v", resp.BatchItemFailures)
		}
	}
	if failed := b.handle(t, record("m-1", "x")); len(failed) != 0 {
		t.Errorf("slow holder reported %v failed: a retry would run the handler a third time", failed)
	}
	if got := b.business.Calls(); len(got) != 2 {
		t.Errorf("business ran %d times, want 2 (slow holder and takeover)", len(got))
	}
	if logs := b.logs.String(); !strings.Contains(logs, "another holder took the key over") || !strings.Contains(logs, "LOCK_TIMEOUT") {
		t.Errorf("no error line saying the lock was lost and naming LOCK_TIMEOUT:\n%s", logs)
	}
	// The record is the second holder's completion.
	if failed := b.handle(t, record("m-1", "x")); len(failed) != 0 || len(b.business.Calls()) != 2 {
		t.Errorf("after both: failed %v, calls %d; want a duplicate", failed, len(b.business.Calls()))
	}
}
