//go:build integration

package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/local/localesm"
	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/local/pgserver"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
	"github.com/sqs-once/sqs-once/sqsonce/store/pgstore"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// The two-stage pipeline of exactly-once emits, on moto_server: stage 1
// consumes orders (each sent twice), records the order and emits
// OrderAccepted to queue 2; stage 2, keyed on the emitted message's id,
// consumes queue 2 and records one shipment per message. Over a few
// hundred orders, stage 1's holders die between the commit and the send
// (the message is not deleted: the invocation never answered), the
// answer to the send is lost after SQS applied it (the send goes again,
// with the same id), and holders pause past their locks: the message is
// delivered again to another invocation, whose clock is past the lock,
// which takes the key over, writes the order and emits; then the paused
// holder's work returns, its completion is refused and its staged message
// is never sent. Every order must end with exactly one shipment, with
// stage 1's store on DynamoDB and on PostgreSQL (the order row written in
// the completion's transaction: one row per order). The control, in the
// same run, sends OrderAccepted inside the handler, as a handler must
// without Emit, with the same faults: its dead and paused holders' orders
// get a second shipment.

const pipelineOrders = 150

// pipelineLock is stage 1's lock (LockTimeout); the invocation that takes
// a paused holder's key over has its clock two of them ahead.
const pipelineLock = time.Minute

// pipelineFault is what happens to an order's first processing at stage 1.
type pipelineFault int

const (
	pipelineNoFault pipelineFault = iota
	// diesBeforeSend: the invocation dies after the commit, before the
	// send (the emit mode), or after the send, before the completion (the
	// control: its send is inside the handler).
	diesBeforeSend
	// sendAnswerLost: SQS applies the SendMessageBatch and the answer is
	// lost (a 500 after forwarding): the SDK's retries are off, so the
	// lock sees the failure, and the redelivery sends again.
	sendAnswerLost
	// pausedPastLock: the holder's work, once it has written the order and
	// emitted (the control: sent), is held; meanwhile the message is
	// delivered again to an invocation whose clock is past the lock, which
	// takes the key over and completes it; then the held work returns.
	pausedPastLock
	pipelineFaults
)

func (f pipelineFault) String() string {
	return [...]string{"none", "dies before send", "send answer lost", "paused past its lock"}[f]
}

func pipelineFaultOf(i int) pipelineFault { return pipelineFault(i % int(pipelineFaults)) }

// attrHolder marks the message a paused holder emits: it must never be
// sent.
const attrHolder = "holder"

// orderBody is an order message.
type orderBody struct {
	Order string `json:"order"`
	Fault int    `json:"fault"`
}

// pipelineRun is one mode's counts.
type pipelineRun struct {
	mu        sync.Mutex
	shipments map[string]int
	orders    map[string]int
	// pending counts stage 1's emit-pending outcomes: the faults fired.
	pending int
	// refused counts the outcomes of stage 1's first invocation whose lock
	// was lost: the paused holders' completions refused.
	refused int
	// paused is the orders whose first holder paused.
	paused map[string]bool
}

// pause reports whether order's holder is the first of an order marked
// pausedPastLock: the one to pause.
func (r *pipelineRun) pause(b orderBody) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if pipelineFault(b.Fault) != pausedPastLock || r.paused[b.Order] {
		return false
	}
	r.paused[b.Order] = true
	return true
}

func (r *pipelineRun) add(m map[string]int, order string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m[order]++
}

// dyingSender is the stage 1 sender of the emit mode: the first send of
// an order marked diesBeforeSend does not happen (the invocation died
// before it); the rest go to the real sender. It counts the messages it
// is given that a paused holder staged: there must be none.
type dyingSender struct {
	sqsonce.Sender
	mu         sync.Mutex
	died       map[string]bool
	pausedSent int
}

func (s *dyingSender) Send(ctx context.Context, msgs []sqsonce.Outgoing) []error {
	errs := make([]error, len(msgs))
	var live []sqsonce.Outgoing
	var at []int
	s.mu.Lock()
	for i, m := range msgs {
		var b orderBody
		_ = json.Unmarshal([]byte(m.Body), &b)
		if m.Attributes[attrHolder] == "paused" {
			s.pausedSent++
		}
		if pipelineFault(b.Fault) == diesBeforeSend && !s.died[b.Order] {
			s.died[b.Order] = true
			errs[i] = errors.New("the invocation died before the send")
			continue
		}
		live = append(live, m)
		at = append(at, i)
	}
	s.mu.Unlock()
	if len(live) > 0 {
		for k, err := range s.Sender.Send(ctx, live) {
			errs[at[k]] = err
		}
	}
	return errs
}

// pipelineMode is one stage 1 of the run: emitting (or sending inside the
// handler, the control), its store on DynamoDB or PostgreSQL.
type pipelineMode struct {
	name string
	emit bool
	// pg: stage 1's store is pgstore, and the handler writes the order
	// row in the completion's transaction (pgstore.Tx).
	pg bool
}

func TestEmitPipelineUnderFaults(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// PostgreSQL for stage 1's store in one mode, started for this test
	// alone (as cmd/sqs-once's store tests do): the package's other tests
	// do not need it.
	pgCtx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	pg, err := pgserver.Start(pgCtx, pgserver.Options{})
	cancel()
	if err != nil {
		// Never skipped: the tier needs the server, and says how to get it.
		t.Fatal(err)
	}
	t.Cleanup(pg.Stop)
	// Enough connections for every record of a batch, and for the
	// invocations that take paused holders' keys over while those hold
	// theirs.
	pool, err := pgxpool.New(t.Context(), pg.DSN+"&pool_max_conns=32")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pgstore.CreateTable(t.Context(), pool, "emit_stage1"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(t.Context(), `CREATE TABLE emit_orders (n bigserial PRIMARY KEY, name text NOT NULL)`); err != nil {
		t.Fatal(err)
	}

	modes := []pipelineMode{{"emit", true, false}, {"emit on PostgreSQL", true, true}, {"send in handler", false, false}}
	// Each mode's run and Sender, made before the modes run side by side
	// (each on queues and a table of its own): the maps are only read
	// while they run.
	results := map[string]*pipelineRun{}
	senders := map[string]*dyingSender{}
	for _, mode := range modes {
		results[mode.name] = &pipelineRun{shipments: map[string]int{}, orders: map[string]int{}, paused: map[string]bool{}}
		if mode.emit {
			senders[mode.name] = &dyingSender{died: map[string]bool{}}
		}
	}
	t.Run("modes", func(t *testing.T) {
		for _, mode := range modes {
			t.Run(mode.name, func(t *testing.T) {
				t.Parallel()
				runPipelineMode(t, cfg, quiet, pool, mode, results[mode.name], senders[mode.name])
			})
		}
	})
	if t.Failed() {
		return
	}

	faulted, paused := 0, 0
	for i := range pipelineOrders {
		if pipelineFaultOf(i) != pipelineNoFault {
			faulted++
		}
		if pipelineFaultOf(i) == pausedPastLock {
			paused++
		}
	}
	for _, mode := range modes {
		run := results[mode.name]
		missing, twice := 0, 0
		for i := range pipelineOrders {
			switch n := run.shipments[orderName(mode.name, i)]; {
			case n == 0:
				missing++
			case n > 1:
				twice++
				if mode.emit {
					t.Errorf("%s: order %d (fault %s): %d shipments", mode.name, i, pipelineFaultOf(i), n)
				}
			}
		}
		t.Logf("%s: %d orders, %d emit-pending outcomes (the holders dead before the send, the sends' answers lost), %d paused holders' completions refused: %d orders without a shipment, %d with more than one", mode.name, pipelineOrders, run.pending, run.refused, missing, twice)
		if len(run.paused) != paused {
			t.Errorf("%s: %d holders paused; want %d", mode.name, len(run.paused), paused)
		}
		if run.refused != paused {
			t.Errorf("%s: %d completions of stage 1's first invocation refused (its lock lost); want exactly one per paused holder (%d)", mode.name, run.refused, paused)
		}
		if !mode.emit {
			if twice == 0 {
				t.Errorf("%s: no order with a second shipment; the control shows nothing the emits prevent", mode.name)
			}
			continue
		}
		if want := faulted - paused; run.pending < want {
			t.Errorf("%s: %d emit-pending outcomes; want at least one per order whose holder died before the send or whose send's answer was lost (%d): the faults did not all fire", mode.name, run.pending, want)
		}
		n := senders[mode.name].pausedSent
		t.Logf("%s: %d messages staged by paused holders given to the Sender", mode.name, n)
		if n > 0 {
			t.Errorf("%s: %d messages staged by paused holders were sent; want none (their completions were refused)", mode.name, n)
		}
		if missing > 0 || twice > 0 {
			t.Errorf("%s: %d orders without a shipment, %d with more than one; want every order exactly once", mode.name, missing, twice)
		}
	}
	// PostgreSQL: the order rows, written in the completions'
	// transactions: the paused holders' were never committed.
	rows := map[string]int{}
	rs, err := pool.Query(t.Context(), `SELECT name, count(*) FROM emit_orders GROUP BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rs.Next() {
		var name string
		var n int
		if err := rs.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		rows[name] = n
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	rs.Close()
	for i := range pipelineOrders {
		if n := rows[orderName("emit on PostgreSQL", i)]; n != 1 {
			t.Errorf("emit on PostgreSQL: order %d (fault %s): %d order rows; want 1", i, pipelineFaultOf(i), n)
		}
	}
}

// runPipelineMode runs one mode of TestEmitPipelineUnderFaults on queues
// and a table of its own, counting into run; sender is the emit modes'
// Sender (nil for the control), its SQS client set here.
func runPipelineMode(t *testing.T, cfg aws.Config, quiet *slog.Logger, pool *pgxpool.Pool, mode pipelineMode, run *pipelineRun, sender *dyingSender) {
	q1 := mototest.NewQueue(t, cfg, false, nil)
	q2 := mototest.NewQueue(t, cfg, false, nil)
	table := mototest.NewIdempotencyTable(t, cfg)
	// The send's answer lost: SQS applies the batch, the proxy answers
	// 500, once per order marked so (the first batch carrying it).
	proxy, err := faultproxy.Start(mototest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	for i := range pipelineOrders {
		if pipelineFaultOf(i) == sendAnswerLost {
			proxy.ScriptWhen("SendMessageBatch", faultproxy.BodyContains(fmt.Sprintf(`\"order\":\"%s\"`, orderName(mode.name, i))), faultproxy.FailAfter)
		}
	}
	viaProxy := cfg.Copy()
	viaProxy.BaseEndpoint = aws.String(proxy.URL)
	viaProxy.RetryMaxAttempts = 1
	sqsDirect := sqs.NewFromConfig(cfg)
	sqsProxied := sqs.NewFromConfig(viaProxy)
	var store1 store.Store = dynamostore.NewTransactional(motoserver.Atomic(dynamodb.NewFromConfig(cfg)), table)
	if mode.pg {
		store1 = pgstore.New(pool, "emit_stage1")
	}
	died := map[string]bool{}
	var diedMu sync.Mutex
	// stage1 is a stage 1 invocation's processor, its clock ahead by
	// ahead: the first invocation's, or (2*pipelineLock) the one that
	// takes a paused holder's key over. first: its lock lost is
	// counted (only a paused holder's may be).
	stage1 := func(ahead time.Duration, first bool, h sqsonce.Handler) *sqsonce.Processor {
		c := sqsonce.ConsumerConfig{
			Config: sqsonce.Config{Store: store1, KeyPrefix: "stage1", LockTimeout: pipelineLock, Logger: quiet, OnOutcome: func(_ context.Context, o sqsonce.Outcome) {
				run.mu.Lock()
				defer run.mu.Unlock()
				if o.Reason == sqsonce.ReasonEmitPending {
					run.pending++
				}
				if o.LockLost && first {
					run.refused++
				}
			}, Test: sqsonce.TestConfig{Now: func() time.Time { return time.Now().Add(ahead) }}},
			Key: sqsonce.KeyFromBody("/order"), AWS: cfg,
		}
		if mode.emit {
			c.Sender = sender
		}
		p, err := sqsonce.NewConsumer(c, h)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// takeOver is the paused holder's message delivered again, to an
	// invocation whose clock is past the holder's lock: SQS redelivers
	// a message whose visibility timeout ran out while its holder was
	// held. It returns once that invocation has answered.
	var takeOver func(ctx context.Context, msg events.SQSMessage)
	var handler1 sqsonce.Handler
	if mode.emit {
		sender.Sender = &targets.Sender{SQS: sqsProxied}
		handler1 = func(ctx context.Context, msg events.SQSMessage) error {
			var b orderBody
			if err := json.Unmarshal([]byte(msg.Body), &b); err != nil {
				return sqsonce.Permanent(err)
			}
			run.add(run.orders, b.Order)
			if mode.pg {
				tx, err := pgstore.Tx(ctx)
				if err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `INSERT INTO emit_orders (name) VALUES ($1)`, b.Order); err != nil {
					return err
				}
			}
			m := sqsonce.Message{To: "sqs:" + q2, Body: msg.Body}
			pause := run.pause(b)
			if pause {
				m.Attributes = map[string]string{attrHolder: "paused"}
			}
			if err := sqsonce.Emit(ctx, m); err != nil {
				return err
			}
			if pause {
				takeOver(ctx, msg)
			}
			return nil
		}
	} else {
		handler1 = func(ctx context.Context, msg events.SQSMessage) error {
			var b orderBody
			if err := json.Unmarshal([]byte(msg.Body), &b); err != nil {
				return sqsonce.Permanent(err)
			}
			run.add(run.orders, b.Order)
			_, err := sqsProxied.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(q2), Entries: []sqstypes.SendMessageBatchRequestEntry{{Id: aws.String("0"), MessageBody: aws.String(msg.Body)}}})
			if err != nil {
				return err
			}
			if run.pause(b) {
				takeOver(ctx, msg)
				return nil
			}
			diedMu.Lock()
			defer diedMu.Unlock()
			if pipelineFault(b.Fault) == diesBeforeSend && !died[b.Order] {
				died[b.Order] = true
				return errors.New("the invocation died after the send, before the completion")
			}
			return nil
		}
	}
	p1 := stage1(0, true, handler1)
	later := stage1(2*pipelineLock, false, handler1)
	takeOver = func(_ context.Context, msg events.SQSMessage) {
		// Another invocation: its own context, nothing of the held
		// work's, its deadline 30 s after its clock's now (the
		// processor budgets the batch by its clock).
		ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(2*pipelineLock+30*time.Second))
		defer cancel()
		resp, err := later.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{msg}})
		if err != nil || len(resp.BatchItemFailures) > 0 {
			t.Errorf("%s: the invocation taking a paused holder's key over: %v, %d records failed", mode.name, err, len(resp.BatchItemFailures))
		}
	}
	stage2Cfg := sqsonce.ConsumerConfig{
		Config: sqsonce.Config{Store: dynamostore.New(motoserver.Atomic(dynamodb.NewFromConfig(cfg)), table), KeyPrefix: "stage2", Logger: quiet},
		Key:    sqsonce.KeyFromAttribute(sqsonce.AttrEmitID), AWS: cfg,
	}
	if !mode.emit {
		// Nothing stable to key on: a message sent twice is two.
		stage2Cfg.Key = sqsonce.KeyFromMessageID()
	}
	p2, err := sqsonce.NewConsumer(stage2Cfg, func(ctx context.Context, msg events.SQSMessage) error {
		var b orderBody
		if err := json.Unmarshal([]byte(msg.Body), &b); err != nil {
			return sqsonce.Permanent(err)
		}
		run.add(run.shipments, b.Order)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Every order twice: a producer's retry. Sent ten messages to a call.
	var batch []sqstypes.SendMessageBatchRequestEntry
	send := func() {
		out, err := sqsDirect.SendMessageBatch(t.Context(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(q1), Entries: batch})
		if err != nil || len(out.Failed) > 0 {
			t.Fatalf("send the orders: %v %+v", err, out)
		}
		batch = batch[:0]
	}
	for i := range pipelineOrders {
		body, _ := json.Marshal(orderBody{Order: orderName(mode.name, i), Fault: int(pipelineFaultOf(i))})
		for range 2 {
			batch = append(batch, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(len(batch))), MessageBody: aws.String(string(body))})
			if len(batch) == 10 {
				send()
			}
		}
	}
	if len(batch) > 0 {
		send()
	}
	drain(t, sqsDirect, q1, p1.Handle)
	drain(t, sqsDirect, q2, p2.Handle)
}

func orderName(mode string, i int) string {
	return fmt.Sprintf("%s-%03d", strings.ReplaceAll(mode, " ", "-"), i)
}

// drain is Lambda's event source mapping, one poller: it receives
// batches from queue, hands each to handle as Lambda's event, deletes
// what the response does not list as failed, and makes the failed ones
// visible again at once (their visibility timeout, which a test would
// otherwise wait out). It returns once the queue is empty; it fails the
// test after a bounded number of rounds.
func drain(t *testing.T, api *sqs.Client, queue string, handle func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)) {
	t.Helper()
	ctx := t.Context()
	arn := "arn:aws:sqs:" + motoserver.Region + ":123456789012:" + queue[strings.LastIndex(queue, "/")+1:]
	empty := 0
	for round := 0; ; round++ {
		if round > 5*pipelineOrders {
			t.Fatalf("%s not drained after %d rounds", queue, round)
		}
		out, err := api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queue), MaxNumberOfMessages: 10, VisibilityTimeout: 30, MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			if empty++; empty == 2 {
				return
			}
			continue
		}
		empty = 0
		ev, err := localesm.NewEvent(out.Messages, arn, motoserver.Region)
		if err != nil {
			t.Fatal(err)
		}
		invCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		resp, err := handle(invCtx, ev)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		failed := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
		// One call for the batch's deletes and one for its failures, as
		// Lambda's poller does (ten calls of each were most of moto's work).
		var del []sqstypes.DeleteMessageBatchRequestEntry
		var again []sqstypes.ChangeMessageVisibilityBatchRequestEntry
		for i, m := range out.Messages {
			id := aws.String(strconv.Itoa(i))
			if failed[aws.ToString(m.MessageId)] {
				again = append(again, sqstypes.ChangeMessageVisibilityBatchRequestEntry{Id: id, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
			} else {
				del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: id, ReceiptHandle: m.ReceiptHandle})
			}
		}
		if len(del) > 0 {
			out, err := api.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(queue), Entries: del})
			if err != nil || len(out.Failed) > 0 {
				t.Fatalf("delete: %v %+v", err, out)
			}
		}
		if len(again) > 0 {
			out, err := api.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(queue), Entries: again})
			if err != nil || len(out.Failed) > 0 {
				t.Fatalf("change visibility: %v %+v", err, out)
			}
		}
	}
}
