//go:build integration

package sqsonce_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/local/localesm"
	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// The two-stage pipeline of exactly-once emits, on moto_server: stage 1
// consumes orders (each sent twice), records the order and emits
// OrderAccepted to queue 2; stage 2, keyed on the emitted message's id,
// consumes queue 2 and records one shipment per message. Over a few
// hundred orders, stage 1's holders die between the commit and the send
// (the message is not deleted: the invocation never answered), and the
// answer to the send is lost after SQS applied it (the send goes again,
// with the same id). Every order must end with exactly one shipment. The
// control, in the same run, sends OrderAccepted inside the handler, as a
// handler must without Emit, with the same faults: its dead holders'
// orders get a second shipment.

const pipelineOrders = 150

// pipelineFault is what happens to an order's first processing at stage 1.
type pipelineFault int

const (
	noFault pipelineFault = iota
	// diesBeforeSend: the invocation dies after the commit, before the
	// send (the emit mode), or after the send, before the completion (the
	// control: its send is inside the handler).
	diesBeforeSend
	// sendAnswerLost: SQS applies the SendMessageBatch and the answer is
	// lost (a 500 after forwarding): the SDK's retries are off, so the
	// lock sees the failure, and the redelivery sends again.
	sendAnswerLost
)

func (f pipelineFault) String() string {
	return [...]string{"none", "dies before send", "send answer lost"}[f]
}

func faultOf(i int) pipelineFault { return pipelineFault(i % 3) }

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
}

func (r *pipelineRun) add(m map[string]int, order string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m[order]++
}

// dyingSender is the stage 1 sender of the emit mode: the first send of
// an order marked diesBeforeSend does not happen (the invocation died
// before it); the rest go to the real sender.
type dyingSender struct {
	sqsonce.Sender
	mu   sync.Mutex
	died map[string]bool
}

func (s *dyingSender) Send(ctx context.Context, msgs []sqsonce.Outgoing) []error {
	errs := make([]error, len(msgs))
	var live []sqsonce.Outgoing
	var at []int
	s.mu.Lock()
	for i, m := range msgs {
		var b orderBody
		_ = json.Unmarshal([]byte(m.Body), &b)
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

func TestEmitPipelineUnderFaults(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	results := map[string]*pipelineRun{}
	for _, mode := range []string{"emit", "send in handler"} {
		run := &pipelineRun{shipments: map[string]int{}, orders: map[string]int{}}
		results[mode] = run
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
			if faultOf(i) == sendAnswerLost {
				proxy.ScriptWhen("SendMessageBatch", faultproxy.BodyContains(fmt.Sprintf(`\"order\":\"%s\"`, orderName(mode, i))), faultproxy.FailAfter)
			}
		}
		viaProxy := cfg.Copy()
		viaProxy.BaseEndpoint = aws.String(proxy.URL)
		viaProxy.RetryMaxAttempts = 1
		sqsDirect := sqs.NewFromConfig(cfg)
		sqsProxied := sqs.NewFromConfig(viaProxy)
		store1 := dynamostore.NewTransactional(motoserver.Atomic(dynamodb.NewFromConfig(cfg)), table)
		died := map[string]bool{}
		var diedMu sync.Mutex
		stage1Cfg := sqsonce.ConsumerConfig{
			Config: sqsonce.Config{Store: store1, KeyPrefix: "stage1", Logger: quiet, OnOutcome: func(_ context.Context, o sqsonce.Outcome) {
				if o.Reason == sqsonce.ReasonEmitPending {
					run.mu.Lock()
					run.pending++
					run.mu.Unlock()
				}
			}},
			Key: sqsonce.KeyFromBody("/order"), AWS: cfg,
		}
		var handler1 sqsonce.Handler
		if mode == "emit" {
			stage1Cfg.Sender = &dyingSender{Sender: &targets.Sender{SQS: sqsProxied}, died: map[string]bool{}}
			handler1 = func(ctx context.Context, msg events.SQSMessage) error {
				var b orderBody
				if err := json.Unmarshal([]byte(msg.Body), &b); err != nil {
					return sqsonce.Permanent(err)
				}
				run.add(run.orders, b.Order)
				return sqsonce.Emit(ctx, sqsonce.Message{To: "sqs:" + q2, Body: msg.Body})
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
				diedMu.Lock()
				defer diedMu.Unlock()
				if pipelineFault(b.Fault) == diesBeforeSend && !died[b.Order] {
					died[b.Order] = true
					return errors.New("the invocation died after the send, before the completion")
				}
				return nil
			}
		}
		p1, err := sqsonce.NewConsumer(stage1Cfg, handler1)
		if err != nil {
			t.Fatal(err)
		}
		stage2Cfg := sqsonce.ConsumerConfig{
			Config: sqsonce.Config{Store: dynamostore.New(motoserver.Atomic(dynamodb.NewFromConfig(cfg)), table), KeyPrefix: "stage2", Logger: quiet},
			Key:    sqsonce.KeyFromAttribute(sqsonce.AttrEmitID), AWS: cfg,
		}
		if mode != "emit" {
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
		// Every order twice: a producer's retry.
		for i := range pipelineOrders {
			body, _ := json.Marshal(orderBody{Order: orderName(mode, i), Fault: int(faultOf(i))})
			for range 2 {
				if _, err := sqsDirect.SendMessage(t.Context(), &sqs.SendMessageInput{QueueUrl: aws.String(q1), MessageBody: aws.String(string(body))}); err != nil {
					t.Fatal(err)
				}
			}
		}
		drain(t, sqsDirect, q1, p1.Handle)
		drain(t, sqsDirect, q2, p2.Handle)
	}
	emit, control := results["emit"], results["send in handler"]
	missing, twice := 0, 0
	for i := range pipelineOrders {
		switch n := emit.shipments[orderName("emit", i)]; {
		case n == 0:
			missing++
		case n > 1:
			twice++
			t.Errorf("emit: order %d (fault %s): %d shipments", i, faultOf(i), n)
		}
	}
	controlTwice := 0
	for i := range pipelineOrders {
		if control.shipments[orderName("send in handler", i)] > 1 {
			controlTwice++
		}
	}
	t.Logf("emit: %d orders, %d emit-pending outcomes (the faults), %d orders without a shipment, %d with more than one; send in handler: %d with more than one", pipelineOrders, emit.pending, missing, twice, controlTwice)
	faulted := 0
	for i := range pipelineOrders {
		if faultOf(i) != noFault {
			faulted++
		}
	}
	if emit.pending < faulted {
		t.Errorf("emit: %d emit-pending outcomes; want at least one per faulted order (%d): the faults did not all fire", emit.pending, faulted)
	}
	if missing > 0 || twice > 0 {
		t.Errorf("emit: %d orders without a shipment, %d with more than one; want every order exactly once", missing, twice)
	}
	if controlTwice == 0 {
		t.Errorf("send in handler: no order with a second shipment; the control shows nothing the emits prevent")
	}
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
		for _, m := range out.Messages {
			if failed[aws.ToString(m.MessageId)] {
				_, err = api.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(queue), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
			} else {
				_, err = api.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queue), ReceiptHandle: m.ReceiptHandle})
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}
