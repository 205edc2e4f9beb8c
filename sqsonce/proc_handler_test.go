package sqsonce

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/sqsmsg"
)

// keyFrom sets ConsumerConfig.Key from its IDEMPOTENCY_KEY spelling.
func keyFrom(t testing.TB, source string) func(*ConsumerConfig) {
	t.Helper()
	key, err := parseKeySource(source)
	if err != nil {
		t.Fatal(err)
	}
	return func(c *ConsumerConfig) { c.Key = key }
}

func TestConcurrentDeliveriesRunHandlerOnce(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be, keyFrom(t, "body:/orderId"))
		// A producer's retry and SQS's own redelivery: several messages, one
		// order, handled by several Lambda instances at once.
		const instances = 8
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range instances {
			p := b.newProcessor(t)
			wg.Go(func() {
				<-start
				msg := procRecord(msgIDs("m", instances)[i], `{"orderId":"o-1"}`)
				if _, err := p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg}}); err != nil {
					t.Error(err)
				}
			})
		}
		close(start)
		wg.Wait()
		if got := b.handler.Calls(); len(got) != 1 {
			t.Fatalf("handler ran %d times (%v) for one order delivered %d times concurrently, want 1", len(got), got, instances)
		}
	})
}

func TestDuplicateIsReportedDoneWithoutRunning(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be)
		msg := procRecord("m-1", "hello")
		if failed := b.handle(t, msg); len(failed) != 0 {
			t.Fatalf("first delivery failed: %v", failed)
		}
		if failed := b.handle(t, msg); len(failed) != 0 {
			t.Fatalf("duplicate reported failed: %v; SQS would redeliver it forever", failed)
		}
		if got := b.handler.Calls(); len(got) != 1 {
			t.Errorf("handler ran %d times, want 1", len(got))
		}
	})
}

func TestInProgress(t *testing.T) {
	t.Parallel()
	for _, policy := range []InProgressPolicy{InProgressRetry, InProgressDrop} {
		t.Run(string(policy), func(t *testing.T) {
			t.Parallel()
			eachBackend(t, func(t *testing.T, be procBackend) {
				b := procSetup(t, be, func(c *ConsumerConfig) { c.InProgress = policy })
				// The first holder is still running when the redelivery arrives.
				release := make(chan struct{})
				entered := make(chan struct{})
				b.handler.hook = func(_ context.Context, msg events.SQSMessage) {
					if msg.ReceiptHandle == "first" {
						close(entered)
						<-release
					}
				}
				first := procRecord("m-1", "x", func(m *events.SQSMessage) { m.ReceiptHandle = "first" })
				done := make(chan []string)
				go func() { done <- b.handle(t, first) }()
				<-entered

				failed := b.handle(t, procRecord("m-1", "x"))
				want := []string{"m-1"}
				if policy == InProgressDrop {
					want = []string{}
				}
				if !slices.Equal(failed, want) {
					t.Errorf("redelivery while in progress: failed %v, want %v", failed, want)
				}
				close(release)
				<-done
				if got := b.handler.Calls(); len(got) != 1 {
					t.Errorf("handler ran %d times, want 1", len(got))
				}
			})
		})
	}
}

func TestExpiredLockIsTakenOver(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be)
		// A holder dies between its side effect and its completion: the
		// record stays PROCESSING under its 60 s lock.
		b.faults.fail("complete", errors.New("process killed"))
		b.handle(t, procRecord("m-1", "x"))
		b.faults.fail("complete", nil)

		if failed := b.handle(t, procRecord("m-1", "x")); !slices.Equal(failed, []string{"m-1"}) {
			t.Fatalf("redelivery within the lock: failed %v, want [m-1]", failed)
		}
		b.clock.Advance(61 * time.Second)
		if failed := b.handle(t, procRecord("m-1", "x")); len(failed) != 0 {
			t.Fatalf("redelivery after the lock expired: failed %v, want taken over and done", failed)
		}
		if got := b.handler.Calls(); len(got) != 2 {
			t.Errorf("handler ran %d times, want 2: once by the dead holder, once by the takeover", len(got))
		}
	})
}

func TestKeySourcesGuardTheRightKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		source       KeySource
		first, again events.SQSMessage
		key          string
	}{
		{"body JSON pointer: a producer's re-send has a new messageId", KeyFromBody("/order/id"),
			procRecord("m-1", `{"order":{"id":"o-7"}}`), procRecord("m-2", `{"order":{"id":"o-7"},"retry":true}`), "o-7"},
		{"attribute", KeyFromAttribute("idempotency-key"),
			procRecord("m-1", "a", withMsgAttr("idempotency-key", "String", "k-1")), procRecord("m-2", "b", withMsgAttr("idempotency-key", "String", "k-1")), "k-1"},
		{"replayed dead letter keyed by its original messageId", KeyFromMessageID(),
			procRecord("m-1", "a"), procRecord("m-replayed", "a", withMsgAttr(sqsmsg.AttrOriginalMessageID, "String", "m-1")), "m-1"},
		{"key function", KeyFunc(func(m events.SQSMessage) (string, error) { return strings.ToUpper(m.Body), nil }),
			procRecord("m-1", "order-9"), procRecord("m-2", "ORDER-9"), "ORDER-9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			eachBackend(t, func(t *testing.T, be procBackend) {
				b := procSetup(t, be, func(c *ConsumerConfig) { c.Key = tt.source })
				var seen []string // what the handler is told its key is
				b.handler.hook = func(ctx context.Context, _ events.SQSMessage) { seen = append(seen, Key(ctx)) }
				if failed := b.handle(t, tt.first); len(failed) != 0 {
					t.Fatalf("first: failed %v", failed)
				}
				if failed := b.handle(t, tt.again); len(failed) != 0 {
					t.Fatalf("second: failed %v", failed)
				}
				if got := b.handler.Calls(); !slices.Equal(got, []string{tt.first.MessageId}) {
					t.Errorf("handler calls %v, want only %s: the second message has the same key", got, tt.first.MessageId)
				}
				if !slices.Equal(seen, []string{tt.key}) {
					t.Errorf("Key(ctx) in the handler = %v, want [%s]", seen, tt.key)
				}
			})
		})
	}
}

func TestMissingKeyFailsWithoutRunning(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be, keyFrom(t, "body:/orderId"))
		failed := b.handle(t, procRecord("no-key", `{"other":1}`), procRecord("not-json", `orderId=1`), procRecord("ok", `{"orderId":1}`))
		if !slices.Equal(failed, []string{"no-key", "not-json"}) {
			t.Errorf("failed %v, want [no-key not-json]", failed)
		}
		if got := b.handler.Calls(); !slices.Equal(got, []string{"ok"}) {
			t.Errorf("handler calls %v: a record without its key must never run unguarded", got)
		}
		if n := b.faults.calls(); n != 2 {
			t.Errorf("%d store calls, want 2 (only the keyed record)", n)
		}
		logs := b.logs.String()
		for _, id := range []string{"no-key", "not-json"} {
			if !strings.Contains(logs, `"level":"ERROR","msg":"record not processed: no idempotency key`) ||
				!strings.Contains(logs, `"messageId":"`+id+`"`) {
				t.Errorf("no error line naming %s and the missing key:\n%s", id, logs)
			}
		}
		// The configuration came from the environment: the error names the
		// variable.
		if !strings.Contains(logs, "IDEMPOTENCY_KEY=body:/orderId") {
			t.Errorf("the error does not name IDEMPOTENCY_KEY:\n%s", logs)
		}
	})
}

// TestCallsPerRecord: against DynamoDB, the calls per record stay at the
// protocol's floor; in memory, the Store calls are the same.
func TestCallsPerRecord(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be)
		b.handler.errs["bad"] = errors.New("downstream 503")
		tests := []struct {
			name string
			msg  events.SQSMessage
			want int
		}{
			{"new message: acquire, complete", procRecord("new", "x"), 2},
			{"duplicate: acquire refused", procRecord("new", "x"), 1},
			{"failure: acquire, release", procRecord("bad", "x"), 2},
		}
		for _, tt := range tests { // sequential: each step builds on the last
			b.faults.reset()
			b.handle(t, tt.msg)
			if got := b.faults.calls(); got != tt.want {
				t.Errorf("%s: %d calls, want %d", tt.name, got, tt.want)
			}
		}
		// With LOCAL_CACHE, a warm duplicate costs none.
		b.cfg.LocalCache = 10
		b.processor = b.newProcessor(t)
		b.handle(t, procRecord("new", "x"))
		b.faults.reset()
		if b.handle(t, procRecord("new", "x")); b.faults.calls() != 0 {
			t.Errorf("warm duplicate: %d calls, want 0", b.faults.calls())
		}
	})
}

func TestUnavailableStoreLeavesRecordFailedAndUnrun(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be)
		b.faults.fail("acquire", &types.ProvisionedThroughputExceededException{Message: new("throttled")})
		if failed := b.handle(t, procRecord("m-1", "x"), procRecord("m-2", "y")); !slices.Equal(failed, []string{"m-1", "m-2"}) {
			t.Errorf("failed %v, want both records", failed)
		}
		if got := b.handler.Calls(); len(got) != 0 {
			t.Errorf("handler ran %v without the lock", got)
		}
	})
}

func TestUnrecordedCompletionReportsSuccess(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be)
		b.faults.fail("complete", &types.InternalServerError{})
		// The side effect happened: retrying the message would repeat it.
		if failed := b.handle(t, procRecord("m-1", "x")); len(failed) != 0 {
			t.Errorf("failed %v, want the record reported done", failed)
		}
		if got := b.faults.opCalls("complete"); got < 2 {
			t.Errorf("completion written %d times, want retries", got)
		}
		if logs := b.logs.String(); !strings.Contains(logs, `"level":"ERROR"`) || !strings.Contains(logs, "duplicate possible") {
			t.Errorf("no error line saying a duplicate is possible:\n%s", logs)
		}
	})
}

func TestHandlerFailureAndPanicAreRetried(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be)
		b.handler.errs["bad"] = errors.New("boom")
		b.handler.hook = func(_ context.Context, msg events.SQSMessage) {
			if msg.MessageId == "panics" {
				panic("nil map")
			}
		}
		failed := b.handle(t, procRecord("ok", "x"), procRecord("bad", "x"), procRecord("panics", "x"))
		slices.Sort(failed)
		if !slices.Equal(failed, []string{"bad", "panics"}) {
			t.Fatalf("failed %v, want [bad panics]", failed)
		}
		// The panic's line says it in one line, its stack in a field of
		// its own (not escaped into the error's text).
		var panicLine map[string]any
		for _, line := range strings.Split(b.logs.String(), "\n") {
			if strings.Contains(line, `"messageId":"panics"`) && strings.Contains(line, "record failed") {
				if err := json.Unmarshal([]byte(line), &panicLine); err != nil {
					t.Fatal(err)
				}
			}
		}
		if e, _ := panicLine["error"].(string); e != "sqsonce: function panicked: nil map" {
			t.Errorf("the panic's error field is %q, want one line", e)
		}
		if st, _ := panicLine["stack"].(string); !strings.Contains(st, "goroutine") {
			t.Errorf("the panic's line has no stack field: %v", panicLine)
		}
		// Both locks were released, so the retry runs at once.
		b.handler.errs = map[string]error{}
		b.handler.hook = nil
		if failed := b.handle(t, procRecord("bad", "x"), procRecord("panics", "x")); len(failed) != 0 {
			t.Errorf("retry failed %v: locks were not released", failed)
		}
	})
}

func TestStandardBatchRunsConcurrently(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be)
		// Every call waits until all ten are running: a sequential processor
		// could never get past the first.
		const n = 10
		var arrived sync.WaitGroup
		arrived.Add(n)
		allIn := make(chan struct{})
		go func() { arrived.Wait(); close(allIn) }()
		b.handler.hook = func(context.Context, events.SQSMessage) {
			arrived.Done()
			select {
			case <-allIn:
			case <-time.After(10 * time.Second):
			}
		}
		var records []events.SQSMessage
		for _, id := range msgIDs("m", n) {
			records = append(records, procRecord(id, "x"))
		}
		b.handle(t, records...)
		select {
		case <-allIn:
		default:
			t.Fatal("the ten records of a standard batch did not run concurrently")
		}
	})
}

func TestMaxConcurrencyBoundsParallelRecords(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be, func(c *ConsumerConfig) { c.MaxConcurrency = 3 })
		var mu sync.Mutex
		running, peak := 0, 0
		b.handler.hook = func(context.Context, events.SQSMessage) {
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
		for _, id := range msgIDs("m", 12) {
			records = append(records, procRecord(id, "x"))
		}
		b.handle(t, records...)
		if peak > 3 {
			t.Errorf("%d records ran at once, want at most MAX_CONCURRENCY=3", peak)
		}
	})
}

func TestFIFOGroupsRunInOrderAndStopAtFailure(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be)
		b.handler.errs["a2"] = errors.New("boom")
		// Groups a and b each wait for the other to start: they must run in
		// parallel, while the records within a group run in order.
		var started sync.WaitGroup
		started.Add(2)
		bothIn := make(chan struct{})
		go func() { started.Wait(); close(bothIn) }()
		b.handler.hook = func(_ context.Context, msg events.SQSMessage) {
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
			procRecord("a1", "x", inGroup("a")), procRecord("b1", "x", inGroup("b")), procRecord("a2", "x", inGroup("a")),
			procRecord("b2", "x", inGroup("b")), procRecord("a3", "x", inGroup("a")), procRecord("b3", "x", inGroup("b")),
		}
		failed := b.handle(t, records...)
		if !slices.Equal(failed, []string{"a2", "a3"}) {
			t.Errorf("failed %v, want [a2 a3]: a3 must not run after a2 failed", failed)
		}
		var a, bGroup []string
		for _, id := range b.handler.Calls() {
			if id[0] == 'a' {
				a = append(a, id)
			} else {
				bGroup = append(bGroup, id)
			}
		}
		if !slices.Equal(a, []string{"a1", "a2"}) || !slices.Equal(bGroup, []string{"b1", "b2", "b3"}) {
			t.Errorf("group a ran %v, b ran %v; want [a1 a2] and [b1 b2 b3] in order", a, bGroup)
		}
	})
}

func TestHandlerSlowerThanItsLock(t *testing.T) {
	t.Parallel()
	// The log line names the setting as the configuration spelled it: the
	// variable when it came from the environment, the field otherwise.
	for _, fromEnv := range []bool{true, false} {
		setting := map[bool]string{true: "LOCK_TIMEOUT", false: "Config.LockTimeout"}[fromEnv]
		t.Run(setting, func(t *testing.T) {
			t.Parallel()
			eachBackend(t, func(t *testing.T, be procBackend) {
				b := procSetup(t, be) // LOCK_TIMEOUT 60 s
				if !fromEnv {
					b.cfg = goConfig(b.cfg)
					b.processor = b.newProcessor(t)
				}
				// The first holder outlives its lock; meanwhile another instance
				// takes the key over and runs it too (documented window 3). The
				// first must then neither overwrite the new holder's record nor
				// ask for a retry, which would run the handler a third time.
				second := b.newProcessor(t)
				var slowHolder atomic.Bool
				b.handler.hook = func(context.Context, events.SQSMessage) {
					if !slowHolder.CompareAndSwap(false, true) {
						return // the takeover's own run
					}
					b.clock.Advance(61 * time.Second)
					if resp, _ := second.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{procRecord("m-1", "x")}}); len(resp.BatchItemFailures) != 0 {
						t.Errorf("takeover of the expired lock failed: %v", resp.BatchItemFailures)
					}
				}
				if failed := b.handle(t, procRecord("m-1", "x")); len(failed) != 0 {
					t.Errorf("slow holder reported %v failed: a retry would run the handler a third time", failed)
				}
				if got := b.handler.Calls(); len(got) != 2 {
					t.Errorf("handler ran %d times, want 2 (slow holder and takeover)", len(got))
				}
				logs := b.logs.String()
				if !strings.Contains(logs, "another holder took the key over") || !strings.Contains(logs, "raise "+setting) {
					t.Errorf("no error line saying the lock was lost and naming %s:\n%s", setting, logs)
				}
				if !fromEnv && strings.Contains(logs, "LOCK_TIMEOUT") {
					t.Errorf("a Config built in Go is told about an environment variable:\n%s", logs)
				}
				// The record is the second holder's completion.
				if failed := b.handle(t, procRecord("m-1", "x")); len(failed) != 0 || len(b.handler.Calls()) != 2 {
					t.Errorf("after both: failed %v, calls %d; want a duplicate", failed, len(b.handler.Calls()))
				}
			})
		})
	}
}

// goConfig is cfg as a program would build it in Go, field by field: every
// exported field's value, without the mark ConfigFromEnv leaves (an
// unexported field) that makes errors and logs name variables.
func goConfig(cfg ConsumerConfig) ConsumerConfig {
	var out ConsumerConfig
	copyExported(reflect.ValueOf(cfg), reflect.ValueOf(&out).Elem())
	out.Config = Config{}
	copyExported(reflect.ValueOf(cfg.Config), reflect.ValueOf(&out.Config).Elem())
	return out
}

// copyExported sets dst's exported fields to src's.
func copyExported(src, dst reflect.Value) {
	for i := range src.NumField() {
		if dst.Type().Field(i).IsExported() {
			dst.Field(i).Set(src.Field(i))
		}
	}
}

// discardLogger is for processors whose logs no test reads.
var discardLogger = slog.New(slog.DiscardHandler)
