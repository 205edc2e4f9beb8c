package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/local/localesm"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// The pipeline's modes (-emit, -emit-inline): how the business handler
// hands its OrderAccepted message to the second stage.
const (
	// EmitStaged is -emit: the message is staged with sqsonce.Emit,
	// committed with the key's completion and sent after it.
	EmitStaged = "emit"
	// EmitInline is -emit-inline, the control: the handler sends the
	// message itself, before its key's completion.
	EmitInline = "inline"
)

// orderAccepted is the body of the message stage 1 hands to stage 2.
type orderAccepted struct {
	Event   string `json:"event"`
	OrderID string `json:"orderId"`
	Run     string `json:"run"`
	// Charge is the number, in stage 1's ledger, of the side effect whose
	// run of the handler made the message.
	Charge int `json:"charge"`
}

const orderAcceptedEvent = "OrderAccepted"

// pipeline is the second stage: its queue, how stage 1's handler reaches
// it, and what stage 2 shipped.
type pipeline struct {
	mode  string
	url   string
	name  string
	runID string
	// api sends -emit-inline's messages from inside the handler: the
	// pipeline's client, as the handler's own would be.
	api *sqs.Client
	// ships is stage 2's ledger: one line per "ship order X".
	ships    *Ledger
	arrivals *arrivalLog

	mu sync.Mutex
	// crashes are the keys whose -emit invocation is to crash in its
	// send: afterSend when the messages reach the queue first.
	crashes map[string]sendCrash
}

// sendCrash is where an -emit crash key's invocation hangs: after its
// commit, before the send (the messages never leave), or after the send
// reached the queue, before its answer (they did, unmarked).
type sendCrash int

const (
	crashBeforeSend sendCrash = iota + 1
	crashAfterSend
)

// newStage2Queue creates the second queue: the demo's own, not the
// template's, with the main queue's visibility timeout so that stage 2's
// function timeout fits it.
func newStage2Queue(ctx context.Context, api *sqs.Client, stackName string, visibility int) (name, url string, err error) {
	name = stackName + "-orders-accepted"
	out, err := api.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName:  aws.String(name),
		Attributes: map[string]string{string(sqstypes.QueueAttributeNameVisibilityTimeout): strconv.Itoa(visibility)},
	})
	if err != nil {
		return "", "", fmt.Errorf("create the second stage's queue %s: %w", name, err)
	}
	return name, aws.ToString(out.QueueUrl), nil
}

// planCrashes assigns the workload's crash keys, in order, alternately a
// crash before and after the send.
func (p *pipeline) planCrashes(w Workload) {
	p.crashes = map[string]sendCrash{}
	n := 0
	for _, k := range w.Keys {
		if !k.Crash {
			continue
		}
		p.crashes[k.ID] = crashBeforeSend
		if n%2 == 1 {
			p.crashes[k.ID] = crashAfterSend
		}
		n++
	}
}

// crashesInSend: with -emit a crash key crashes in the send, after its
// commit, not in the handler.
func (p *pipeline) crashesInSend() bool { return p != nil && p.mode == EmitStaged }

// takeCrash returns the crash planned for the first send of msgs' key,
// once.
func (p *pipeline) takeCrash(msgs []sqsonce.Outgoing) (sendCrash, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range msgs {
		var b orderAccepted
		if json.Unmarshal([]byte(m.Body), &b) != nil {
			continue
		}
		if c, ok := p.crashes[b.OrderID]; ok {
			delete(p.crashes, b.OrderID)
			return c, true
		}
	}
	return 0, false
}

// accept hands key's OrderAccepted to stage 2 after its side effect e:
// staged with sqsonce.Emit (-emit), or sent right away (-emit-inline) with
// an id of the handler's own making, new on every run of it.
func (p *pipeline) accept(ctx context.Context, key Key, e Entry) error {
	body, err := json.Marshal(orderAccepted{Event: orderAcceptedEvent, OrderID: key.ID, Run: p.runID, Charge: e.Seq})
	if err != nil {
		return err
	}
	if p.mode == EmitStaged {
		return sqsonce.Emit(ctx, sqsonce.Message{To: "sqs:" + p.url, Body: string(body), Attributes: map[string]string{"event": orderAcceptedEvent}})
	}
	_, err = p.api.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:    aws.String(p.url),
		MessageBody: aws.String(string(body)),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			"event":            {DataType: aws.String("String"), StringValue: aws.String(orderAcceptedEvent)},
			sqsonce.AttrEmitID: {DataType: aws.String("String"), StringValue: aws.String(fmt.Sprintf("inline-%s-%d", p.runID, e.Seq))},
		},
	})
	if err != nil {
		return fmt.Errorf("send OrderAccepted for %s: %w", key.ID, err)
	}
	return nil
}

// crashingSender is stage 1's Config.Sender with -emit: the real one,
// except that a crash key's first send hangs (until the run releases it)
// as an invocation killed between its commit and its send would, before
// or after the messages reached the queue.
type crashingSender struct {
	next    sqsonce.Sender
	pipe    *pipeline
	release <-chan struct{}
}

var _ sqsonce.Sender = (*crashingSender)(nil)

// Send implements sqsonce.Sender.
func (s *crashingSender) Send(ctx context.Context, msgs []sqsonce.Outgoing) []error {
	c, ok := s.pipe.takeCrash(msgs)
	if !ok {
		return s.next.Send(ctx, msgs)
	}
	if c == crashAfterSend {
		s.next.Send(ctx, msgs)
	}
	<-s.release
	errs := make([]error, len(msgs))
	for i := range errs {
		errs[i] = errSendCrashed
	}
	return errs
}

var errSendCrashed = errors.New("simulated crash: this invocation was abandoned after its commit, in the send of its emitted message")

// arrival2 is one delivery of a message to stage 2.
type arrival2 struct {
	MessageID string
	EmitID    string
	Key       string
}

// arrivalLog is every delivery stage 2's mapping made, before its
// processor decides anything.
type arrivalLog struct {
	mu       sync.Mutex
	arrivals []arrival2
}

func (a *arrivalLog) add(ev events.SQSEvent) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range ev.Records {
		var b orderAccepted
		_ = json.Unmarshal([]byte(r.Body), &b)
		a.arrivals = append(a.arrivals, arrival2{MessageID: r.MessageId, EmitID: stringAttr(r, sqsonce.AttrEmitID), Key: b.OrderID})
	}
}

func (a *arrivalLog) snapshot() []arrival2 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]arrival2(nil), a.arrivals...)
}

// ship is stage 2's business handler: its side effect is "ship order X",
// a line of its own ledger.
func (p *pipeline) ship(keys map[string]Key) sqsonce.Handler {
	return func(ctx context.Context, msg events.SQSMessage) error {
		var b orderAccepted
		if err := json.Unmarshal([]byte(msg.Body), &b); err != nil || b.Event != orderAcceptedEvent {
			return sqsonce.Permanent(fmt.Errorf("not an OrderAccepted message: %s", msg.Body))
		}
		if _, ok := keys[b.OrderID]; !ok || b.Run != p.runID {
			return sqsonce.Permanent(fmt.Errorf("order %q of run %q is not part of this run", b.OrderID, b.Run))
		}
		e := Entry{Key: b.OrderID, Send: stringAttr(msg, sqsonce.AttrEmitID), MessageID: msg.MessageId, ReceiveCount: msg.Attributes["ApproximateReceiveCount"]}
		if lc, ok := lambdacontext.FromContext(ctx); ok {
			e.RequestID = lc.AwsRequestID
		}
		return p.ships.Append(ctx, e)
	}
}

// stage2Mapping is the second stage: a second sqsonce processor, keyed on
// the emit id (IDEMPOTENCY_KEY=attribute:sqs-once-emit-id), behind a local
// event source mapping on the second queue. It shares the idempotency
// table with stage 1 under a key prefix of its own, as two functions of
// one stack may.
func (r *localRun) stage2Mapping(awsCfg aws.Config) (*localesm.Mapping, error) {
	cfg := r.info.processorCfg
	cfg.Key = sqsonce.KeyFromAttribute(sqsonce.AttrEmitID)
	cfg.KeyPrefix = cfg.KeyPrefix + "-ship"
	cfg.Store = dynamostore.New(r.ddb, r.info.table)
	cfg.QueueURL, cfg.FailureBackoffBase = "", 0
	cfg.Target, cfg.Sender, cfg.Metrics = nil, nil, nil
	cfg.AWS, cfg.Logger = awsCfg, r.fnLog.With("stage", 2)
	proc, err := sqsonce.NewConsumer(cfg, r.stage2.ship(r.w.KeyIndex()))
	if err != nil {
		return nil, fmt.Errorf("the second stage's processor: %w", err)
	}
	esmCfg := localesm.Config{
		QueueURL: r.stage2.url, FunctionName: r.info.name + "-ship", BatchSize: demoBatchSize,
		ReportBatchItemFailures: true, Pollers: 2, Timeout: r.info.processor.Timeout, Logger: cfg.Logger,
	}
	arrivals := r.stage2.arrivals
	return localesm.New(r.stage2.api, esmCfg, func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		arrivals.add(ev)
		return proc.Handle(ctx, ev)
	})
}

// newStage2 creates the second stage's queue and ledger (shipments.jsonl
// in dir) and hands it to the business handler. api reaches moto_server
// directly (the queue's creation is the demo's set-up); pipe is the
// pipeline's client, which the handler and stage 2 use.
func (r *localRun) newStage2(ctx context.Context, dir string, api, pipe *sqs.Client, stackName, runID string) error {
	name, url, err := newStage2Queue(ctx, api, stackName, int(r.opts.Visibility/time.Second))
	if err != nil {
		return err
	}
	ships, err := OpenLedger(filepath.Join(dir, "shipments.jsonl"))
	if err != nil {
		return err
	}
	p := &pipeline{mode: r.opts.Emit, url: url, name: name, runID: runID, api: pipe, ships: ships, arrivals: &arrivalLog{}}
	if p.mode == EmitStaged {
		p.planCrashes(r.w)
	}
	r.stage2, r.biz.pipe = p, p
	return nil
}

// evaluation is what the report needs of the second stage, once it has
// stopped: its ledger, read back from the file, and its deliveries.
func (p *pipeline) evaluation() (*Stage2, error) {
	if err := p.ships.Close(); err != nil {
		return nil, err
	}
	ships, err := ReadLedger(p.ships.Path())
	if err != nil {
		return nil, err
	}
	return &Stage2{Mode: p.mode, Queue: p.name, Ledger: p.ships.Path(), Ships: ships, Arrivals: p.arrivals.snapshot()}, nil
}
