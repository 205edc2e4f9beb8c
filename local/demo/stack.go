package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/samstack"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

const (
	// peekVisibility hides a message received from a deployed operator queue
	// while the runner looks at it; other producers' messages are left to
	// reappear after it, untouched.
	peekVisibility = 30 * time.Second
	// peekBackoffMax bounds the pause after receiving only other producers'
	// messages, so a busy operator queue is sampled, never spun on.
	peekBackoffMax = 20 * time.Second
)

// stackNotChecked is what a run against a deployed stack cannot see: the
// deployed functions run their own business handler and consume the queues
// themselves.
var stackNotChecked = []string{
	"side effects per key (the deployed business handler's effects are not visible from outside; the processor's log in CloudWatch has one line per handler run)",
	"duplicates suppressed per message (a re-send of a completed key leaves no trace but the processor's log line \"duplicate suppressed\")",
	"dead-lettered messages and replay delays (the replayer consumes the DLQ; see its log lines)",
	"transient, permanent and crashing keys (they need the demo's own handler; run without -stack)",
}

// tableReader is the part of the DynamoDB client a run against a deployed
// stack uses: it only reads the idempotency table.
type tableReader interface {
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

var _ tableReader = (*dynamodb.Client)(nil)

// stackRun is one run of the workload against a deployed stack.
type stackRun struct {
	opts     Options
	info     *stackInfo
	api      queueAPI
	ddb      tableReader
	w        Workload
	producer *producer
	tracker  *Tracker
	// keyAttr is set when the stack keys on a message attribute.
	keyAttr string
	// expected is the idempotency key of each send, "" when the processor
	// cannot key it (poison); completed holds the keys seen COMPLETED.
	expected  map[string]string
	completed map[string]bool
	start     time.Time
}

func stackAWSConfig(ctx context.Context, opts Options) (aws.Config, error) {
	if opts.Endpoint != "" {
		// A stack deployed into a local moto_server.
		return localAWSConfig(ctx, opts.Endpoint)
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS credentials: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, errors.New("-stack needs a region: set AWS_REGION or a profile's region")
	}
	return cfg, nil
}

// estimate is how long the slowest message of the workload takes with the
// stack's own timings: a poison message is received maxReceiveCount times a
// visibility timeout apart, on the main queue and after each replay, and
// waits for every replay's delay. FAILURE_BACKOFF_BASE would add to it.
func (s *stackInfo) estimate(poison bool) time.Duration {
	if !poison {
		return 5 * time.Minute
	}
	d := time.Duration((s.replayCfg.MaxAttempts+1)*s.maxReceiveCount) * s.visibility
	for n := 1; n <= s.replayCfg.MaxAttempts; n++ {
		d += s.replayCfg.Backoff.Ceiling(n)
	}
	return d
}

// keyedOnBody reports whether the stack's idempotency key comes from the body,
// so a re-send with a new messageId is a duplicate and a body without the key
// is a poison message.
func (s *stackInfo) keyedOnBody() bool { return s.processorCfg.Key.String() == "body:/orderId" }

func runStack(ctx context.Context, opts Options, progressOut io.Writer) (Summary, error) {
	start := time.Now()
	awsCfg, err := stackAWSConfig(ctx, opts)
	if err != nil {
		return Summary{}, err
	}
	st, err := samstack.Describe(ctx, awsCfg, opts.Stack)
	if err != nil {
		return Summary{}, err
	}
	api := sqs.NewFromConfig(awsCfg)
	info, err := loadStack(ctx, api, st)
	if err != nil {
		return Summary{}, err
	}
	key := info.processorCfg.Key.String()
	if strings.HasPrefix(key, "body:") && !info.keyedOnBody() {
		return Summary{}, fmt.Errorf("stack %s keys on %s, but the demo's messages carry their order id in /orderId: run the demo against a stack with IdempotencyKey body:/orderId, messageId or attribute:<name>", opts.Stack, key)
	}
	var notes []string
	spec := opts.spec(info.maxReceiveCount)
	spec.Transient, spec.Permanent, spec.Crash = 0, 0, 0
	if !info.keyedOnBody() && spec.Poison > 0 {
		notes = append(notes, fmt.Sprintf("no poison messages: the stack keys on %s, so no message of this workload can be made unprocessable", key))
		spec.Poison = 0
	}
	if key == "messageId" {
		notes = append(notes, "the stack keys on messageId: a re-send with a new messageId is a new message to it by design, so re-sent keys are processed once per send (set IdempotencyKey to body:/orderId to suppress them)")
	}
	w, err := NewWorkload(spec, opts.Seed, newRunID())
	if err != nil {
		return Summary{}, err
	}
	if spec.Poison > 0 {
		fmt.Fprintf(progressOut, "poison messages need about %s to reach the operator queue with this stack's timings (visibility timeout %s, maxReceiveCount %d, MaxAttempts %d); -poison 0 checks the rest in minutes\n",
			info.estimate(true).Round(time.Minute), info.visibility, info.maxReceiveCount, info.replayCfg.MaxAttempts)
	}
	r := &stackRun{
		opts: opts, info: info, api: api, ddb: dynamodb.NewFromConfig(awsCfg), w: w, tracker: NewTracker(),
		completed: map[string]bool{}, start: start,
	}
	if name, ok := strings.CutPrefix(key, "attribute:"); ok {
		r.keyAttr = name
	}
	r.producer = &producer{api: api, url: info.mainURL, w: w, keys: w.KeyIndex(), body: r.body, attrs: r.attrs}
	sum, err := r.execute(ctx, progressOut)
	if err != nil {
		return Summary{}, err
	}
	sum.Unexpected = append(notes, sum.Unexpected...)
	return sum, nil
}

func (r *stackRun) execute(ctx context.Context, progressOut io.Writer) (Summary, error) {
	pollCtx, stop := context.WithCancel(ctx)
	defer stop()
	var watcher sync.WaitGroup
	watcher.Go(func() { r.watchOperator(pollCtx) })

	fmt.Fprintf(progressOut, "sending %s for %s to %s...\n", count(len(r.w.Sends), "message"), count(len(r.w.Keys), "key"), r.info.mainURL)
	ids, err := r.producer.send(ctx, r.w.Sends)
	if err != nil {
		stop()
		watcher.Wait()
		return Summary{}, err
	}
	r.expected = r.expectedKeys(ids)

	prog := newProgressWriter(progressOut)
	wait := r.opts.Wait
	if wait == 0 {
		wait = r.info.estimate(r.w.Stats().Poison > 0) + 5*time.Minute
	}
	// On every way out, what follows the progress line starts on a line of
	// its own.
	defer prog.Done()
	waitErr := r.wait(pollCtx, prog, wait)
	stop()
	watcher.Wait()
	if waitErr != nil && ctx.Err() != nil {
		return Summary{}, waitErr
	}

	left, err := r.info.leftInQueues(context.WithoutCancel(ctx), r.api)
	if err != nil {
		return Summary{}, err
	}
	obs := r.tracker.Snapshot()
	obs.Left = left
	obs.Elapsed = time.Since(r.start)
	sum := r.summarize(obs)
	if waitErr != nil {
		sum.Violations = append(sum.Violations, waitErr.Error())
		sum.OK = false
	}
	// The last progress line, from the report's own counts.
	prog.Update(sum.Progress(), time.Now(), true)
	return sum, nil
}

// body leaves the orderId out of poison messages when the stack keys on the
// body: the processor then cannot key them, fails them, and they go through
// the DLQ and the replays to the operator queue.
func (r *stackRun) body(s Send, k Key) string {
	return r.w.Body(s, k.Kind, k.Kind == Poison && r.info.keyedOnBody())
}

func (r *stackRun) attrs(s Send) map[string]sqstypes.MessageAttributeValue {
	if r.keyAttr == "" {
		return nil
	}
	return map[string]sqstypes.MessageAttributeValue{r.keyAttr: sqsmsg.String(s.Key)}
}

// expectedKeys is the idempotency key the processor reads from each send,
// known from how the demo builds it (runStack accepts only these key
// settings): the message id, the attribute it sets to the send's key, or
// the body's /orderId, which a poison message lacks; "" for a send the
// processor cannot key.
func (r *stackRun) expectedKeys(messageIDs map[string]string) map[string]string {
	keys := r.w.KeyIndex()
	out := map[string]string{}
	for _, s := range r.w.Sends {
		switch {
		case r.keyAttr != "":
			out[s.ID] = s.Key
		case r.info.keyedOnBody():
			if keys[s.Key].Kind == Poison {
				out[s.ID] = ""
			} else {
				out[s.ID] = s.Key
			}
		default:
			out[s.ID] = messageIDs[s.ID]
		}
	}
	return out
}

// watchOperator receives from the deployed operator queue until ctx ends.
// This run's messages are recorded and deleted. Other messages are counted
// and left alone: hidden for peekVisibility, then visible again to whoever
// else reads the queue. After a batch with none of this run's messages it
// pauses, longer each time, so a queue full of other messages is sampled
// rather than received in a loop.
func (r *stackRun) watchOperator(ctx context.Context) {
	keyOf := map[string]string{}
	for _, s := range r.w.Sends {
		keyOf[s.ID] = s.Key
	}
	var pause time.Duration
	for ctx.Err() == nil {
		if pause > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause):
			}
		}
		out, err := r.api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:              aws.String(r.info.opURL),
			MaxNumberOfMessages:   10,
			WaitTimeSeconds:       20,
			VisibilityTimeout:     int32(peekVisibility / time.Second),
			MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			pause = min(max(2*pause, time.Second), peekBackoffMax)
			continue
		}
		var mine []sqstypes.DeleteMessageBatchRequestEntry
		for _, m := range out.Messages {
			id := aws.ToString(m.MessageId)
			a, ok := arrival(r.w.RunID, keyOf, id, aws.ToString(m.Body),
				aws.ToString(m.MessageAttributes[sqsmsg.AttrReason].StringValue), aws.ToString(m.MessageAttributes[sqsmsg.AttrReplayCount].StringValue))
			if !ok {
				r.tracker.Foreign(id)
				continue
			}
			r.tracker.AtOperator(a)
			mine = append(mine, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(len(mine))), ReceiptHandle: m.ReceiptHandle})
		}
		if len(mine) > 0 {
			// A failed delete only brings the message back; the Tracker
			// counts one arrival per message id.
			_, _ = r.api.DeleteMessageBatch(context.WithoutCancel(ctx), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(r.info.opURL), Entries: mine})
		}
		switch {
		case len(out.Messages) > 0 && len(mine) == 0:
			pause = min(max(2*pause, time.Second), peekBackoffMax)
		default:
			pause = 0
		}
	}
}

// wait polls the idempotency table for COMPLETED records and the queues'
// depths until every send has reached an end and the queues are drained.
func (r *stackRun) wait(ctx context.Context, prog *progressWriter, wait time.Duration) error {
	ctx, cancel := context.WithDeadline(ctx, r.start.Add(wait))
	defer cancel()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		if err := r.pollCompleted(ctx); err != nil && ctx.Err() == nil {
			return err
		}
		obs := r.tracker.Snapshot()
		resolved, arrivals := 0, 0
		for _, s := range r.w.Sends {
			if len(obs.Operator[s.ID]) > 0 || r.completed[r.expected[s.ID]] {
				resolved++
			}
			arrivals += len(obs.Operator[s.ID])
		}
		now := time.Now()
		prog.Update(Progress{Resolved: resolved, Sent: len(r.w.Sends), Processed: len(r.completed), Operator: arrivals, Elapsed: now.Sub(r.start), Outside: true}, now, false)
		if resolved == len(r.w.Sends) && drained(ctx, r.api, r.info.mainURL, r.info.dlqURL) {
			return nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("gave up after %s: %d of %s reached an end (raise -wait: the stack's own visibility timeout and backoff apply)", wait, resolved, count(len(r.w.Sends), "message"))
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// pollCompleted reads the idempotency records of the keys not yet seen
// COMPLETED, with the record schema sqsonce exports.
func (r *stackRun) pollCompleted(ctx context.Context) error {
	table, prefix := r.info.table, r.info.processorCfg.KeyPrefix
	byID := map[string]string{}
	for _, k := range r.expected {
		if k != "" && !r.completed[k] {
			byID[store.RecordID(prefix, k)] = k
		}
	}
	for chunk := range slices.Chunk(slices.Sorted(maps.Keys(byID)), 100) {
		ka := ddbtypes.KeysAndAttributes{ConsistentRead: aws.Bool(true)}
		for _, id := range chunk {
			ka.Keys = append(ka.Keys, map[string]ddbtypes.AttributeValue{dynamostore.AttrID: &ddbtypes.AttributeValueMemberS{Value: id}})
		}
		// Unprocessed keys are simply read again on the next poll.
		out, err := r.ddb.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]ddbtypes.KeysAndAttributes{table: ka}})
		if err != nil {
			return fmt.Errorf("read the idempotency table %s: %w", table, err)
		}
		for _, item := range out.Responses[table] {
			status, _ := item[dynamostore.AttrStatus].(*ddbtypes.AttributeValueMemberS)
			if k, ok := byID[recordID(item)]; ok && status != nil && status.Value == string(store.StatusCompleted) {
				r.completed[k] = true
			}
		}
	}
	return nil
}

func (r *stackRun) summarize(obs Observed) Summary {
	s := newSummary("stack", r.opts.Seed, r.w, obs, r.info.timings())
	s.Checked = []string{
		"an idempotency record COMPLETED for every key sent",
		"poison messages at the operator queue with their reason, each once",
		"every message completed or at the operator queue (lost: 0)",
		"main queue and dead-letter queue drained",
	}
	s.NotChecked = stackNotChecked
	s.Foreign = obs.Foreign
	s.Processed = len(r.completed)
	// Resolved as the progress line counts it: at the operator queue, or
	// its key COMPLETED (the stack's deletes cannot be seen from outside).
	s.Resolved = 0
	keys := r.w.KeyIndex()
	for _, snd := range r.w.Sends {
		ops := obs.Operator[snd.ID]
		k := r.expected[snd.ID]
		switch {
		case len(ops) > 0:
			s.Resolved++
			if keys[snd.Key].Kind != Poison {
				s.Unexpected = append(s.Unexpected, fmt.Sprintf("%s reached the operator queue (%s) although it is processable", snd.ID, reasonOrUnknown(ops[0].Reason)))
			}
		case k != "" && r.completed[k]:
			s.Resolved++
		default:
			s.Lost++
			s.LostSends = append(s.LostSends, snd.ID+" (no COMPLETED idempotency record for its key, not at the operator queue)")
		}
	}
	s.finish()
	return s
}
