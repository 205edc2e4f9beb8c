package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/localesm"
	"github.com/sqs-once/sqs-once/internal/processor"
	"github.com/sqs-once/sqs-once/internal/replay"
	"github.com/sqs-once/sqs-once/internal/samstack"
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

// stackRun is a deployed stack as the runner needs it.
type stackRun struct {
	sqs       *sqs.Client
	ddb       *dynamodb.Client
	mainURL   string
	dlqURL    string
	opURL     string
	table     string
	prefix    string
	key       processor.KeySource
	keyAttr   string // set when the stack keys on a message attribute
	replayCfg replay.Config
	maxRecv   int
	// visibility is the main queue's visibility timeout.
	visibility time.Duration
	timeout    time.Duration
	// lockTimeout is LOCK_TIMEOUT, 0 for the invocation's deadline.
	lockTimeout time.Duration
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

func describeStackRun(ctx context.Context, awsCfg aws.Config, name string) (*stackRun, error) {
	st, err := samstack.Describe(ctx, awsCfg, name)
	if err != nil {
		return nil, err
	}
	r := &stackRun{sqs: sqs.NewFromConfig(awsCfg), ddb: dynamodb.NewFromConfig(awsCfg)}
	for key, dst := range map[string]*string{"MainQueueUrl": &r.mainURL, "DeadLetterQueueUrl": &r.dlqURL, "OperatorQueueUrl": &r.opURL, "IdempotencyTableName": &r.table} {
		if *dst, err = st.Output(key); err != nil {
			return nil, fmt.Errorf("%w: is %s an sqs-once stack?", err, name)
		}
	}
	proc, ok := st.Functions[processorFunction]
	if !ok {
		return nil, fmt.Errorf("stack %s has no %s", name, processorFunction)
	}
	pcfg, err := processor.LoadConfig(envconfig.Map(proc.Env))
	if err != nil {
		return nil, fmt.Errorf("%s's environment: %w", processorFunction, err)
	}
	r.prefix, r.key, r.timeout, r.lockTimeout = pcfg.KeyPrefix, pcfg.Key, proc.Timeout, pcfg.LockTimeout
	if name, ok := strings.CutPrefix(pcfg.Key.String(), "attribute:"); ok {
		r.keyAttr = name
	}
	rep, ok := st.Functions[replayerFunction]
	if !ok {
		return nil, fmt.Errorf("stack %s has no %s", name, replayerFunction)
	}
	if r.replayCfg, err = replay.LoadConfig(envconfig.Map(rep.Env)); err != nil {
		return nil, fmt.Errorf("%s's environment: %w", replayerFunction, err)
	}
	if r.maxRecv, err = maxReceiveCount(ctx, r.sqs, r.mainURL); err != nil {
		return nil, err
	}
	out, err := r.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(r.mainURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameVisibilityTimeout},
	})
	if err != nil {
		return nil, fmt.Errorf("read the visibility timeout of %s: %w", r.mainURL, err)
	}
	secs, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameVisibilityTimeout)])
	r.visibility = time.Duration(secs) * time.Second
	return r, nil
}

// estimate is how long the slowest message of the workload takes with the
// stack's own timings: a poison message is received maxReceiveCount times a
// visibility timeout apart, on the main queue and after each replay, and
// waits for every replay's delay. FAILURE_BACKOFF_BASE would add to it.
func (r *stackRun) estimate(poison bool) time.Duration {
	if !poison {
		return 5 * time.Minute
	}
	d := time.Duration((r.replayCfg.MaxAttempts+1)*r.maxRecv) * r.visibility
	for n := 1; n <= r.replayCfg.MaxAttempts; n++ {
		d += r.replayCfg.Backoff.Ceiling(n)
	}
	return d
}

// keyedOnBody reports whether the stack's idempotency key comes from the body,
// so a re-send with a new messageId is a duplicate and a body without the key
// is a poison message.
func (r *stackRun) keyedOnBody() bool { return r.key.String() == "body:/orderId" }

func runStack(ctx context.Context, opts Options, progressOut io.Writer) (Summary, error) {
	start := time.Now()
	awsCfg, err := stackAWSConfig(ctx, opts)
	if err != nil {
		return Summary{}, err
	}
	r, err := describeStackRun(ctx, awsCfg, opts.Stack)
	if err != nil {
		return Summary{}, err
	}
	if k := r.key.String(); strings.HasPrefix(k, "body:") && k != "body:/orderId" {
		return Summary{}, fmt.Errorf("stack %s keys on %s, but the demo's messages carry their order id in /orderId: run the demo against a stack with IdempotencyKey body:/orderId, messageId or attribute:<name>", opts.Stack, k)
	}
	var notes []string
	spec := opts.spec(r.maxRecv)
	spec.Transient, spec.Permanent, spec.Crash = 0, 0, 0
	if !r.keyedOnBody() && spec.Poison > 0 {
		notes = append(notes, fmt.Sprintf("no poison messages: the stack keys on %s, so no message of this workload can be made unprocessable", r.key))
		spec.Poison = 0
	}
	if r.key.String() == "messageId" {
		notes = append(notes, "the stack keys on messageId: a re-send with a new messageId is a new message to it by design, so re-sent keys are processed once per send (set IdempotencyKey to body:/orderId to suppress them)")
	}
	w, err := NewWorkload(spec, opts.Seed, newRunID())
	if err != nil {
		return Summary{}, err
	}
	if spec.Poison > 0 {
		fmt.Fprintf(progressOut, "poison messages need about %s to reach the operator queue with this stack's timings (visibility timeout %s, maxReceiveCount %d, MaxAttempts %d); -poison 0 checks the rest in minutes\n",
			r.estimate(true).Round(time.Minute), r.visibility, r.maxRecv, r.replayCfg.MaxAttempts)
	}

	tracker := NewTracker()
	hide := func(ctx context.Context, receipt string) {
		// Leave other producers' messages visible to the real operator.
		_, _ = r.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(r.opURL), ReceiptHandle: aws.String(receipt)})
	}
	op, err := localesm.New(r.sqs, localesm.Config{QueueURL: r.opURL, FunctionName: "operator", Pollers: 1, Timeout: 30 * time.Second},
		operatorHandler(tracker, w, hide))
	if err != nil {
		return Summary{}, err
	}
	pollCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { _ = op.Run(pollCtx) })

	fmt.Fprintf(progressOut, "sending %d messages for %d keys to %s...\n", len(w.Sends), len(w.Keys), r.mainURL)
	ids, err := sendAll(ctx, r.sqs, r.mainURL, w, w.Sends, r.bodyFor, r.attrsFor)
	if err != nil {
		stop()
		wg.Wait()
		return Summary{}, err
	}
	expected := r.expectedKeys(w, ids)

	prog := newProgressWriter(progressOut)
	completed := map[string]bool{}
	wait := opts.Wait
	if wait == 0 {
		wait = r.estimate(spec.Poison > 0) + 5*time.Minute
	}
	waitErr := r.waitStack(pollCtx, w, expected, completed, tracker, prog, start, wait)
	prog.Done()
	stop()
	wg.Wait()
	if waitErr != nil && ctx.Err() != nil {
		return Summary{}, waitErr
	}

	left, err := leftInQueues(context.WithoutCancel(ctx), r.sqs, r.mainURL, r.dlqURL)
	if err != nil {
		return Summary{}, err
	}
	obs := tracker.Snapshot()
	obs.Left = left
	obs.Elapsed = time.Since(start)
	sum := summarizeStack(w, expected, completed, obs, opts.Seed, r)
	sum.Unexpected = append(notes, sum.Unexpected...)
	if waitErr != nil {
		sum.Violations = append(sum.Violations, waitErr.Error())
		sum.OK = false
	}
	return sum, nil
}

// bodyFor leaves the orderId out of poison messages when the stack keys on
// the body: the processor then cannot key them, fails them, and they go
// through the DLQ and the replays to the operator queue.
func (r *stackRun) bodyFor(w Workload, s Send, k Key) string {
	return w.Body(s, k.Kind, k.Kind == Poison && r.keyedOnBody())
}

func (r *stackRun) attrsFor(s Send) map[string]string {
	if r.keyAttr == "" {
		return nil
	}
	return map[string]string{r.keyAttr: s.Key}
}

// expectedKeys predicts, with the processor's own key logic, the idempotency
// key of each send; "" for a send the processor cannot key (poison).
func (r *stackRun) expectedKeys(w Workload, messageIDs map[string]string) map[string]string {
	keys := w.KeyIndex()
	out := map[string]string{}
	for _, s := range w.Sends {
		msg := events.SQSMessage{MessageId: messageIDs[s.ID], Body: r.bodyFor(w, s, keys[s.Key])}
		if a := r.attrsFor(s); a != nil {
			v := a[r.keyAttr]
			msg.MessageAttributes = map[string]events.SQSMessageAttribute{r.keyAttr: {DataType: "String", StringValue: &v}}
		}
		k, err := r.key.Key(msg)
		if err != nil {
			k = ""
		}
		out[s.ID] = k
	}
	return out
}

// waitStack polls the idempotency table for COMPLETED records and the queues'
// depths until every send has reached an end and the queues are drained.
func (r *stackRun) waitStack(ctx context.Context, w Workload, expected map[string]string, completed map[string]bool,
	t *Tracker, prog *progressWriter, start time.Time, wait time.Duration) error {
	ctx, cancel := context.WithDeadline(ctx, start.Add(wait))
	defer cancel()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		if err := r.pollCompleted(ctx, expected, completed); err != nil && ctx.Err() == nil {
			return err
		}
		obs := t.Snapshot()
		resolved := 0
		for _, s := range w.Sends {
			if _, op := obs.Operator[s.ID]; op || (expected[s.ID] != "" && completed[expected[s.ID]]) {
				resolved++
			}
		}
		now := time.Now()
		prog.Update(Progress{Resolved: resolved, Sent: len(w.Sends), Processed: len(completed), Operator: len(obs.Operator), Elapsed: now.Sub(start)}, now, false)
		if resolved == len(w.Sends) {
			main, err1 := queueDepth(ctx, r.sqs, r.mainURL)
			dlq, err2 := queueDepth(ctx, r.sqs, r.dlqURL)
			if err1 == nil && err2 == nil && main == 0 && dlq == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("gave up after %s: %d of %d messages reached an end (raise -wait: the stack's own visibility timeout and backoff apply)", wait, resolved, len(w.Sends))
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// pollCompleted reads the idempotency records of the keys not yet seen
// COMPLETED. The record id is "<KEY_PREFIX>#<key>" (the lock protocol's).
func (r *stackRun) pollCompleted(ctx context.Context, expected map[string]string, completed map[string]bool) error {
	var pending []string
	seen := map[string]bool{}
	for _, k := range expected {
		if k != "" && !completed[k] && !seen[k] {
			seen[k] = true
			pending = append(pending, k)
		}
	}
	slices.Sort(pending)
	for start := 0; start < len(pending); start += 100 {
		chunk := pending[start:min(start+100, len(pending))]
		req := map[string]ddbtypes.KeysAndAttributes{r.table: {ConsistentRead: aws.Bool(true)}}
		ka := req[r.table]
		for _, k := range chunk {
			ka.Keys = append(ka.Keys, map[string]ddbtypes.AttributeValue{"id": &ddbtypes.AttributeValueMemberS{Value: r.prefix + "#" + k}})
		}
		req[r.table] = ka
		// Unprocessed keys are simply read again on the next poll.
		out, err := r.ddb.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return fmt.Errorf("read the idempotency table %s: %w", r.table, err)
		}
		for _, item := range out.Responses[r.table] {
			id, _ := item["id"].(*ddbtypes.AttributeValueMemberS)
			status, _ := item["status"].(*ddbtypes.AttributeValueMemberS)
			if id != nil && status != nil && status.Value == "COMPLETED" {
				completed[strings.TrimPrefix(id.Value, r.prefix+"#")] = true
			}
		}
	}
	return nil
}

func summarizeStack(w Workload, expected map[string]string, completed map[string]bool, obs Observed, seed uint64, r *stackRun) Summary {
	s := Summary{
		Mode:            "stack",
		Seed:            seed,
		RunID:           w.RunID,
		DurationSeconds: obs.Elapsed.Seconds(),
		Workload:        w.Stats(),
		Timings: Timings{
			VisibilityTimeoutSeconds: int(r.visibility / time.Second),
			FunctionTimeoutSeconds:   int(r.timeout / time.Second),
			LockTimeoutSeconds:       int(r.lockTimeout / time.Second),
			MaxReceiveCount:          r.maxRecv,
			MaxAttempts:              r.replayCfg.MaxAttempts,
			BackoffBaseSeconds:       r.replayCfg.Backoff.Base.Seconds(),
			BackoffRate:              r.replayCfg.Backoff.Rate,
			MaxDelaySeconds:          int(r.replayCfg.Backoff.Cap / time.Second),
			Jitter:                   string(r.replayCfg.Backoff.Strategy),
		},
		Sent:         len(w.Sends),
		UniqueKeys:   len(w.Keys),
		LeftInQueues: obs.Left,
		Operator:     OpStats{Total: len(obs.Operator), ByReason: map[string]int{}},
		Replays:      ReplayStats{ByAttempt: []ReplayAttempt{}},
		Violations:   []string{},
		Unexpected:   []string{},
		Checked: []string{
			"an idempotency record COMPLETED for every key sent",
			"poison messages at the operator queue with their reason",
			"every message completed or at the operator queue (lost: 0)",
			"main queue and dead-letter queue drained",
		},
		NotChecked: stackNotChecked,
	}
	for _, a := range obs.Operator {
		s.Operator.ByReason[reasonOrUnknown(a.Reason)]++
	}
	s.Processed = len(completed)
	keys := w.KeyIndex()
	for _, snd := range w.Sends {
		_, atOp := obs.Operator[snd.ID]
		k := expected[snd.ID]
		switch {
		case atOp:
			if keys[snd.Key].Kind != Poison {
				s.Unexpected = append(s.Unexpected, fmt.Sprintf("%s reached the operator queue (%s) although it is processable", snd.ID, reasonOrUnknown(obs.Operator[snd.ID].Reason)))
			}
		case k != "" && completed[k]:
		default:
			s.Lost++
			s.LostSends = append(s.LostSends, snd.ID+" (no COMPLETED idempotency record for its key, not at the operator queue)")
		}
	}
	s.finish()
	return s
}
