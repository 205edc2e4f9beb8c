package ops

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/testclock"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

const (
	queueURL  = "https://sqs.eu-west-1.amazonaws.com/123456789012/orders"
	queueARN  = "arn:aws:sqs:eu-west-1:123456789012:orders"
	stackDLQ  = "arn:aws:sqs:eu-west-1:123456789012:orders-once-dlq"
	consumerA = "arn:aws:lambda:eu-west-1:123456789012:function:orders-consumer"
	processor = "arn:aws:lambda:eu-west-1:123456789012:function:orders-once-ProcessorFunction-X"
)

// migrated is a stack deployed in front of a consumer, every check passing:
// ready to cut over.
func migrated() *Migration {
	return &Migration{
		Region: "eu-west-1", Stack: "orders-once",
		Queue:                   QueueSettings{URL: queueURL, ARN: queueARN, VisibilitySeconds: 180, RetentionSeconds: 345600, DeadLetterARN: stackDLQ, MaxReceiveCount: 5},
		ProcessorTimeoutSeconds: 30,
		Processor:               &Function{Name: "orders-once-ProcessorFunction-X", ARN: processor, TimeoutSeconds: 30, env: map[string]string{envTarget: "lambda:orders-consumer"}},
		Replayer:                &Function{Name: "replayer", env: map[string]string{envMaxMessageAge: "345600"}},
		StackDeadLetterARN:      stackDLQ,
		StackMapping:            &Mapping{UUID: "stack-uuid", FunctionARN: processor, State: "Disabled"},
		MappingParameter:        "false",
		Target:                  "lambda:orders-consumer",
		ConsumerName:            "orders-consumer",
		Consumer:                &Function{Name: "orders-consumer", ARN: consumerA, TimeoutSeconds: 10},
		ConsumerMappings:        []Mapping{{UUID: "consumer-uuid", FunctionARN: consumerA, State: "Enabled"}},
	}
}

func statuses(checks []Check) map[string]CheckStatus {
	out := map[string]CheckStatus{}
	for _, c := range checks {
		out[c.Name] = c.Status
	}
	return out
}

// TestChecks: each check's verdict for the ways a queue, a stack and a
// consumer can be, without AWS: Checks makes no call.
func TestChecks(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		change func(m *Migration)
		want   map[string]CheckStatus
	}{
		{"ready", func(*Migration) {}, map[string]CheckStatus{checkVisibility: CheckOK, checkRedrive: CheckOK, checkRetention: CheckOK, checkTarget: CheckOK,
			checkConsumer: CheckOK, checkMappings: CheckOK, checkParameter: CheckOK, checkReplayAge: CheckOK}},
		{"visibility one second short", func(m *Migration) { m.Queue.VisibilitySeconds = 179 }, map[string]CheckStatus{checkVisibility: CheckFail}},
		{"batching window counts", func(m *Migration) { m.BatchingWindowSeconds = 5 }, map[string]CheckStatus{checkVisibility: CheckFail}},
		{"no redrive policy", func(m *Migration) { m.Queue.DeadLetterARN, m.Queue.MaxReceiveCount = "", 0 },
			map[string]CheckStatus{checkRedrive: CheckFail, checkRetention: CheckSkip}},
		{"redrive elsewhere", func(m *Migration) { m.Queue.DeadLetterARN = "arn:aws:sqs:eu-west-1:123456789012:old-dlq" }, map[string]CheckStatus{checkRedrive: CheckFail}},
		{"retention equal to the product", func(m *Migration) { m.Queue.RetentionSeconds = 900 }, map[string]CheckStatus{checkRetention: CheckFail, checkReplayAge: CheckWarn}},
		{"no target", func(m *Migration) { m.Target = "" }, map[string]CheckStatus{checkTarget: CheckFail}},
		{"another target", func(m *Migration) { m.Target = "sqs:https://sqs.eu-west-1.amazonaws.com/123456789012/x" }, map[string]CheckStatus{checkTarget: CheckFail}},
		{"target names another function", func(m *Migration) { m.Target = "lambda:other" }, map[string]CheckStatus{checkTarget: CheckFail}},
		{"target by ARN and alias", func(m *Migration) { m.Target = "lambda:" + consumerA + ":live" }, map[string]CheckStatus{checkTarget: CheckOK}},
		{"consumer just covered", func(m *Migration) { m.Consumer.TimeoutSeconds = 25 }, map[string]CheckStatus{checkConsumer: CheckOK}},
		{"consumer too slow", func(m *Migration) { m.Consumer.TimeoutSeconds = 26 }, map[string]CheckStatus{checkConsumer: CheckFail}},
		// 26 s needs ProcessorTimeout 45, and so a visibility of 270 s.
		{"visibility enough for the processor, not for what the consumer needs", func(m *Migration) { m.Consumer.TimeoutSeconds = 26 },
			map[string]CheckStatus{checkVisibility: CheckFail}},
		{"visibility enough for what the consumer needs", func(m *Migration) { m.Consumer.TimeoutSeconds, m.Queue.VisibilitySeconds = 26, 270 },
			map[string]CheckStatus{checkVisibility: CheckOK, checkConsumer: CheckFail}},
		{"no consumer", func(m *Migration) { m.Consumer, m.ConsumerMappings = nil, nil }, map[string]CheckStatus{checkConsumer: CheckSkip, checkMappings: CheckFail}},
		{"cut over", func(m *Migration) { m.StackMapping.State, m.ConsumerMappings[0].State = "Enabled", "Disabled" },
			map[string]CheckStatus{checkMappings: CheckOK, checkParameter: CheckWarn}},
		{"cut over, deployed with true", func(m *Migration) {
			m.StackMapping.State, m.ConsumerMappings[0].State, m.MappingParameter = "Enabled", "Disabled", "true"
		}, map[string]CheckStatus{checkMappings: CheckOK, checkParameter: CheckOK}},
		{"drift: both consume", func(m *Migration) { m.StackMapping.State = "Enabled" }, map[string]CheckStatus{checkMappings: CheckFail}},
		{"still disabling counts as off", func(m *Migration) { m.StackMapping.State, m.ConsumerMappings[0].State = "Enabled", "Disabling" },
			map[string]CheckStatus{checkMappings: CheckOK}},
		{"updating may consume", func(m *Migration) { m.StackMapping.State = "Updating" }, map[string]CheckStatus{checkMappings: CheckFail}},
		{"nothing consumes", func(m *Migration) { m.ConsumerMappings[0].State = "Disabled" }, map[string]CheckStatus{checkMappings: CheckFail}},
		{"another consumer", func(m *Migration) {
			m.OtherMappings = []Mapping{{UUID: "x", FunctionARN: "arn:aws:lambda:eu-west-1:123456789012:function:audit", State: "Enabled"}}
		}, map[string]CheckStatus{checkMappings: CheckFail}},
		{"another consumer, disabled", func(m *Migration) {
			m.OtherMappings = []Mapping{{UUID: "x", FunctionARN: "arn:aws:lambda:eu-west-1:123456789012:function:audit", State: "Disabled"}}
		}, map[string]CheckStatus{checkMappings: CheckOK}},
		{"no mapping in the stack", func(m *Migration) { m.StackMapping = nil }, map[string]CheckStatus{checkMappings: CheckFail, checkParameter: CheckSkip}},
		{"older stack", func(m *Migration) { m.MappingParameter = "" }, map[string]CheckStatus{checkParameter: CheckSkip}},
		{"no replay age limit", func(m *Migration) { m.Replayer.env[envMaxMessageAge] = "0" }, map[string]CheckStatus{checkReplayAge: CheckWarn}},
		{"before the stack", func(m *Migration) {
			*m = Migration{Region: "eu-west-1", Queue: m.Queue, ProcessorTimeoutSeconds: 30, Consumer: m.Consumer, ConsumerMappings: m.ConsumerMappings}
			m.Queue.DeadLetterARN = "arn:aws:sqs:eu-west-1:123456789012:old-dlq"
		}, map[string]CheckStatus{checkVisibility: CheckOK, checkRedrive: CheckOK, checkRetention: CheckOK, checkConsumer: CheckOK, checkMappings: CheckOK}},
		{"before the stack, a consumer that reads another queue", func(m *Migration) {
			*m = Migration{Queue: m.Queue, ProcessorTimeoutSeconds: 30, Consumer: m.Consumer}
		}, map[string]CheckStatus{checkMappings: CheckWarn}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := migrated()
			tt.change(m)
			checks := m.Checks()
			got := statuses(checks)
			for name, want := range tt.want {
				if got[name] != want {
					t.Errorf("%s: %s, want %s", name, got[name], want)
				}
			}
			if tt.name == "ready" && len(got) != len(tt.want) {
				t.Errorf("checks %v, want exactly %v", got, tt.want)
			}
			for _, c := range checks {
				if c.Status == CheckFail && len(c.Change) == 0 && c.Name != checkRetention {
					t.Errorf("%s fails without saying what to change: %s", c.Name, c.Detail)
				}
			}
		})
	}
}

// TestCheckChanges: the changes a failed check prints are the ones that
// fix it.
func TestCheckChanges(t *testing.T) {
	t.Parallel()
	m := migrated()
	m.Queue.VisibilitySeconds, m.Queue.DeadLetterARN, m.Queue.MaxReceiveCount, m.Consumer.TimeoutSeconds = 60, "", 0, 60
	m.BatchingWindowSeconds = 5
	byName := map[string]Check{}
	for _, c := range m.Checks() {
		byName[c.Name] = c
	}
	for name, want := range map[string]string{
		checkVisibility: "aws sqs set-queue-attributes --region eu-west-1 --queue-url " + queueURL + " --attributes VisibilityTimeout=545",
		checkRedrive:    `aws sqs set-queue-attributes --region eu-west-1 --queue-url ` + queueURL + ` --attributes '{"RedrivePolicy":"{\"deadLetterTargetArn\":\"` + stackDLQ + `\",\"maxReceiveCount\":\"5\"}"}'`,
		checkConsumer:   "deploy the stack with ProcessorTimeout=90, and set the queue's VisibilityTimeout to at least 6 x 90 + 5 = 545 s\nor lower orders-consumer's timeout to at most 25 s",
	} {
		if got := strings.Join(byName[name].Change, "\n"); got != want {
			t.Errorf("%s: change\n%s\nwant\n%s", name, got, want)
		}
	}
	// A retention SQS cannot reach: lower maxReceiveCount instead.
	m = migrated()
	m.Queue.MaxReceiveCount, m.Queue.VisibilitySeconds, m.Queue.RetentionSeconds = 1000, 5400, 1209600
	for _, c := range m.Checks() {
		if c.Name == checkRetention && (c.Status != CheckFail || !strings.Contains(strings.Join(c.Change, ""), "lower maxReceiveCount in the redrive policy to at most 223")) {
			t.Errorf("retention: %+v", c)
		}
	}
}

func TestProcessorNeeds(t *testing.T) {
	t.Parallel()
	for consumer, want := range map[int]int{1: 4, 10: 13, 25: 30, 26: 31, 60: 68, 800: 882} {
		if got := processorNeeds(consumer); got != want {
			t.Errorf("processorNeeds(%d) = %d, want %d", consumer, got, want)
		}
	}
	for processor, want := range map[int]int{1: 0, 4: 1, 30: 25, 900: 816} {
		if got := maxConsumerTimeout(processor); got != want {
			t.Errorf("maxConsumerTimeout(%d) = %d, want %d", processor, got, want)
		}
	}
}

func TestRedrivePolicy(t *testing.T) {
	t.Parallel()
	for policy, want := range map[string]int{
		`{"deadLetterTargetArn":"a","maxReceiveCount":5}`:   5,
		`{"deadLetterTargetArn":"a","maxReceiveCount":"7"}`: 7,
		`{"deadLetterTargetArn":"a"}`:                       0,
		`not json`:                                          0,
		``:                                                  0,
	} {
		if _, got := redrivePolicy(policy); got != want {
			t.Errorf("redrivePolicy(%s) maxReceiveCount %d, want %d", policy, got, want)
		}
	}
}

// TestCutoverPlan: the mapping being switched off goes first, both ways,
// so the two never consume together.
func TestCutoverPlan(t *testing.T) {
	t.Parallel()
	steps, err := CutoverPlan(migrated(), false)
	if err != nil || len(steps) != 2 || steps[0].Whose != "consumer" || steps[0].Want != stateDisabled || steps[1].Whose != "stack" || steps[1].Want != stateEnabled {
		t.Errorf("cutover plan %+v, %v: want the consumer's disabled, then the stack's enabled", steps, err)
	}
	steps, err = CutoverPlan(migrated(), true)
	if err != nil || len(steps) != 2 || steps[0].Whose != "stack" || steps[0].Want != stateDisabled || steps[1].Whose != "consumer" || steps[1].Want != stateEnabled {
		t.Errorf("rollback plan %+v, %v: want the stack's disabled, then the consumer's enabled", steps, err)
	}
	m := migrated()
	m.ConsumerMappings = nil
	if _, err := CutoverPlan(m, true); !errors.Is(err, ErrNotFound) {
		t.Errorf("rollback without a consumer mapping: %v, want ErrNotFound", err)
	}
	m.StackMapping = nil
	if _, err := CutoverPlan(m, false); !errors.Is(err, ErrNotFound) {
		t.Errorf("cutover without the stack's mapping: %v, want ErrNotFound", err)
	}
	// The blockers: every failed check but the mappings' own state.
	m = migrated()
	m.StackMapping.State = "Enabled" // drift: both consume
	if b := cutoverBlockers(m, m.Checks()); len(b) != 0 {
		t.Errorf("drift blocks the cutover that undoes it: %+v", b)
	}
	m.Queue.VisibilitySeconds = 10
	m.OtherMappings = []Mapping{{UUID: "x", FunctionARN: "arn:aws:lambda:eu-west-1:123456789012:function:audit", State: "Enabled"}}
	if b := cutoverBlockers(m, m.Checks()); len(b) != 2 {
		t.Errorf("blockers %+v, want the visibility and the other consumer", b)
	}
}

// fakeMappings is Lambda's event source mappings: each update starts a
// transition that ends after a number of reads.
type fakeMappings struct {
	MappingAPI
	state   map[string]string
	pending map[string]int // reads until the transition ends
	lag     int
	updates []string
	fail    map[string]error
}

func (f *fakeMappings) GetEventSourceMapping(_ context.Context, in *lambda.GetEventSourceMappingInput, _ ...func(*lambda.Options)) (*lambda.GetEventSourceMappingOutput, error) {
	id := aws.ToString(in.UUID)
	s := f.state[id]
	if f.pending[id] > 0 {
		if f.pending[id]--; f.pending[id] == 0 {
			s = strings.TrimSuffix(strings.TrimSuffix(s, "ing"), "l") + "led" // Enabling -> Enabled, Disabling -> Disabled
			f.state[id] = s
		}
	}
	return &lambda.GetEventSourceMappingOutput{UUID: in.UUID, State: aws.String(s)}, nil
}

func (f *fakeMappings) UpdateEventSourceMapping(_ context.Context, in *lambda.UpdateEventSourceMappingInput, _ ...func(*lambda.Options)) (*lambda.UpdateEventSourceMappingOutput, error) {
	id := aws.ToString(in.UUID)
	if err := f.fail[id]; err != nil {
		return nil, err
	}
	f.updates = append(f.updates, id)
	if aws.ToBool(in.Enabled) {
		f.state[id] = "Enabling"
	} else {
		f.state[id] = "Disabling"
	}
	f.pending[id] = f.lag
	return &lambda.UpdateEventSourceMappingOutput{UUID: in.UUID, State: aws.String(f.state[id])}, nil
}

// TestMappingsRunWaitsForEachState: each mapping is waited for until Lambda
// reports it in its state before the next is touched; a second run changes
// nothing; a mapping that does not settle in time stops the run, saying
// what was done and how to go on.
func TestMappingsRunWaitsForEachState(t *testing.T) {
	t.Parallel()
	f := &fakeMappings{state: map[string]string{"consumer-uuid": "Enabled", "stack-uuid": "Disabled"}, pending: map[string]int{}, lag: 3}
	clock := testclock.New(time.Unix(1_700_000_000, 0))
	run := &Mappings{Lambda: f, Wait: time.Minute, Poll: 2 * time.Second, Now: clock.Now, Sleep: clock.Sleep}
	steps, _ := CutoverPlan(migrated(), false)
	var order []string
	steps, err := run.Run(context.Background(), steps, func(s CutoverStep) {
		order = append(order, s.UUID+" "+f.state[s.UUID])
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(order, ", ") != "consumer-uuid Disabled, stack-uuid Enabled" {
		t.Errorf("steps ended with %v: the consumer's must be Disabled before the stack's is touched", order)
	}
	if len(f.updates) != 2 || !steps[0].Changed || !steps[1].Changed || steps[0].Was != "Enabled" {
		t.Errorf("updates %v, steps %+v", f.updates, steps)
	}
	// Again: in the wanted states already, no update.
	steps, _ = CutoverPlan(migrated(), false)
	if steps, err = run.Run(context.Background(), steps, nil); err != nil || len(f.updates) != 2 || steps[0].Changed || steps[1].Changed {
		t.Errorf("a second run: %v, updates %v, steps %+v", err, f.updates, steps)
	}
	for _, s := range steps {
		if !strings.Contains(stepWords(s), "already") {
			t.Errorf("a second run says %q", stepWords(s))
		}
	}

	// A mapping still disabling when the wait ends: the run stops before
	// the stack's mapping, and says the queue may be unconsumed.
	f = &fakeMappings{state: map[string]string{"consumer-uuid": "Enabled", "stack-uuid": "Disabled"}, pending: map[string]int{}, lag: 1000}
	run.Lambda = f
	steps, _ = CutoverPlan(migrated(), false)
	steps, err = run.Run(context.Background(), steps, nil)
	if !errors.Is(err, ErrIncomplete) || len(f.updates) != 1 || !strings.Contains(err.Error(), "still Disabling after 1m0s") {
		t.Errorf("a mapping that does not settle: %v, updates %v", err, f.updates)
	}
	// The step did not finish: the consumer may still be consuming.
	if w := stoppedWords(steps, "sqs-once cutover --stack orders-once", "sqs-once cutover --stack orders-once --rollback"); strings.Contains(w, "Nothing consumes") ||
		!strings.Contains(w, "Run sqs-once cutover --stack orders-once again to finish") {
		t.Errorf("stopped words: %s", w)
	}

	// The stack's mapping refused after the consumer's is disabled: the
	// queue is unconsumed, and the words say so.
	f = &fakeMappings{state: map[string]string{"consumer-uuid": "Enabled", "stack-uuid": "Disabled"}, pending: map[string]int{}, lag: 1,
		fail: map[string]error{"stack-uuid": errors.New("AccessDeniedException")}}
	run.Lambda = f
	steps, _ = CutoverPlan(migrated(), false)
	steps, err = run.Run(context.Background(), steps, nil)
	if !errors.Is(err, ErrAWS) || !strings.Contains(err.Error(), "enable the stack's mapping stack-uuid") {
		t.Errorf("a refused update: %v", err)
	}
	if w := stoppedWords(steps, "A", "B"); !strings.Contains(w, "Before it stopped: disable orders-consumer's mapping consumer-uuid: done. Nothing consumes the queue now; messages wait there. Run A again to finish (it skips what is done), or B to go back.") {
		t.Errorf("stopped words: %s", w)
	}
}

// plainText finds Markdown and a count that disagrees with its noun.
var (
	markdown  = regexp.MustCompile("`|\\*\\*|\\]\\(")
	badPlural = regexp.MustCompile(`\b1 (messages|records|items|locks|checks|times|receives|warnings|days|hours|minutes|PROCESSING records)\b|\b([02-9]|\d\d+) (message|record|item|lock|check|time|receive|warning)\b[^-]`)
)

func plainText(t *testing.T, what, s string) {
	t.Helper()
	if m := markdown.FindString(s); m != "" {
		t.Errorf("%s has Markdown %q:\n%s", what, m, s)
	}
	if m := badPlural.FindString(s); m != "" {
		t.Errorf("%s counts wrong, %q:\n%s", what, m, s)
	}
}

// TestTerminalWords renders what the commands print, with counts of 1 and
// 2, and checks it is plain text whose counts agree with their nouns.
func TestTerminalWords(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	var out bytes.Buffer
	c := &cli{io: IO{Stdout: &out, Stderr: &out, Now: func() time.Time { return now }}}
	lock, ttl := now.Add(-time.Minute), now.Add(time.Hour)
	for _, r := range []Record{
		{Key: "k", RecordID: "p#k", Status: store.StatusProcessing, Owner: "o", Fence: 1, LockExpiresAt: &lock, ExpiresAt: &ttl},
		{Key: "k", RecordID: "p#k", Status: store.StatusProcessing, Owner: "o", Fence: 1, Live: true, LockExpiresAt: &ttl},
		{Key: "k", RecordID: "p#k", Status: store.StatusCompleted, Fence: 1, ExpiresAt: &ttl, Remaining: time.Hour},
		{Key: "k", RecordID: "p#k", Status: store.StatusCompleted, Fence: 1, ExpiresAt: &lock},
		{Key: "k", RecordID: "p#k", Status: store.StatusReleased, Fence: 1},
		{Key: "k", RecordID: "p#k", Status: "ODD"},
	} {
		c.printRecord(r)
		plainText(t, "inspect", out.String())
		out.Reset()
		for _, err := range []error{&StateError{Record: r, Want: store.StatusProcessing, Hint: "x"}, &LiveLockError{Record: r}} {
			plainText(t, "an error", err.Error())
		}
	}
	// The refusals of release and forget, from a record as the store reads
	// it.
	for _, status := range []store.Status{store.StatusCompleted, store.StatusProcessing, store.StatusReleased} {
		recs := &Records{DB: oneItem{status: status}, Table: "t", Prefix: "p", Now: func() time.Time { return now }}
		_, rerr := recs.Release(context.Background(), "k", false)
		_, ferr := recs.Forget(context.Background(), "k", func(Record) (bool, error) { return false, nil })
		for _, err := range []error{rerr, ferr} {
			if err != nil {
				plainText(t, "a refusal", err.Error())
			}
		}
	}
	for _, n := range []int{1, 2} {
		msgs := make([]Message, n)
		for i := range msgs {
			sent := now
			msgs[i] = Message{MessageID: "m", SentAt: &sent, ReceiveCount: n, BodyBytes: n}
		}
		c.printMessages("operator", msgs, false)
		c.printSummary("operator", "main", RedriveSummary{RedriveCounts: RedriveCounts{Moved: n, Copies: n, Skipped: n, Failed: n, NotDeleted: n}, Reason: "expired"})
		plainText(t, "peek and redrive", out.String())
		if !strings.Contains(out.String(), count(n, "message", "messages")+" from operator") {
			t.Errorf("peek of %d: %s", n, out.String())
		}
		out.Reset()
		q := &Queues{SQS: failingSQS{}, Now: c.io.Now}
		err := q.showAgain(context.Background(), queueURL, make([]string, n))
		plainText(t, "show again", err.Error())
	}
	m := migrated()
	m.Queue.VisibilitySeconds, m.Queue.MaxReceiveCount = 60, 1
	m.OtherMappings = []Mapping{{UUID: "x", FunctionARN: "arn:aws:lambda:eu-west-1:123456789012:function:audit", State: "Enabled"}}
	c.printChecks(m, m.Checks())
	plainText(t, "preflight", out.String())
	if !strings.Contains(out.String(), "after 1 receive\n") || !strings.Contains(out.String(), "audit also consumes orders: what it receives skips dedupe") ||
		!strings.Contains(out.String(), "2 checks failed: make the changes above") {
		t.Errorf("preflight words:\n%s", out.String())
	}
	out.Reset()
	m = migrated()
	c.printChecks(m, m.Checks())
	if !strings.Contains(out.String(), "Every check passed.") {
		t.Errorf("preflight words:\n%s", out.String())
	}
	for _, n := range []int{1, 2} {
		if got := count(n, "message", "messages"); got != map[int]string{1: "1 message", 2: "2 messages"}[n] {
			t.Errorf("count(%d) = %q", n, got)
		}
	}
	if count(0, "message", "messages") != "0 messages" {
		t.Errorf("count(0)")
	}
}

// oneItem is a table holding one record, of status, for every key.
type oneItem struct {
	DynamoAPI
	status store.Status
}

func (o oneItem) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{Item: map[string]ddbtypes.AttributeValue{
		dynamostore.AttrID:        in.Key[dynamostore.AttrID],
		dynamostore.AttrStatus:    &ddbtypes.AttributeValueMemberS{Value: string(o.status)},
		dynamostore.AttrExpiresAt: &ddbtypes.AttributeValueMemberN{Value: "1700003600"},
	}}, nil
}

// failingSQS fails every visibility change of a batch.
type failingSQS struct{ SQSAPI }

func (failingSQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id})
	}
	return out, nil
}

// TestMappingsNextFollowsTheChecks: the mappings' check names the next
// step, and it follows the other checks: with one failing, cutover would
// refuse, so the next step is that fix and preflight again, never the
// cutover; with none failing, the cutover. The check keeps its place.
func TestMappingsNextFollowsTheChecks(t *testing.T) {
	t.Parallel()
	mappings := func(m *Migration) (Check, []string) {
		var names []string
		var found Check
		for _, c := range m.Checks() {
			names = append(names, c.Name)
			if c.Name == checkMappings {
				found = c
			}
		}
		return found, names
	}
	ready, order := mappings(migrated())
	if !strings.Contains(ready.Detail, "ready to cut over: ") || !strings.HasSuffix(ready.Detail, "; next: sqs-once cutover --stack orders-once") {
		t.Errorf("every check passing: mappings says %q, want next: the cutover", ready.Detail)
	}

	m := migrated()
	m.Queue.VisibilitySeconds = 60
	m.Consumer.TimeoutSeconds = 26
	blocked, order2 := mappings(m)
	if blocked.Status != CheckOK || strings.Contains(blocked.Detail, "next: sqs-once cutover") || strings.Contains(blocked.Detail, "ready to cut over:") ||
		!strings.Contains(blocked.Detail, "not ready to cut over while visibility timeout, consumer timeout fail (sqs-once cutover refuses); next: make the changes above, then sqs-once preflight --stack orders-once again") {
		t.Errorf("with two checks failing: mappings %s says %q", blocked.Status, blocked.Detail)
	}
	if !slices.Equal(order, order2) {
		t.Errorf("the checks' order changed with a failure: %v, then %v", order, order2)
	}

	// Both consume (drift) while a check fails: the fix first.
	m = migrated()
	m.StackMapping.State = "Enabled"
	m.Queue.VisibilitySeconds = 60
	if drift, _ := mappings(m); len(drift.Change) != 3 || drift.Change[0] != "first make the changes above: cutover refuses while visibility timeout fails" {
		t.Errorf("drift with a check failing: change %q", drift.Change)
	}

	// Nothing consumes: the rollback, which runs without the checks,
	// comes first while a check fails; else the cutover.
	m = migrated()
	m.ConsumerMappings[0].State = "Disabled"
	if idle, _ := mappings(m); len(idle.Change) != 2 || idle.Change[0] != "sqs-once cutover --stack orders-once" {
		t.Errorf("nothing consumes, every other check passing: change %q", idle.Change)
	}
	m.Queue.VisibilitySeconds = 60
	if idle, _ := mappings(m); len(idle.Change) != 2 || !strings.HasPrefix(idle.Change[0], "sqs-once cutover --stack orders-once --rollback ") ||
		idle.Change[1] != "or make the changes above, then sqs-once cutover --stack orders-once   (it refuses while visibility timeout fails)" {
		t.Errorf("nothing consumes, a check failing: change %q", idle.Change)
	}
}
