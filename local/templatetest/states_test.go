//go:build integration

package templatetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/internal/testclock"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// crashStore is the deployed store with processors that crash between the
// target's start and the completion: for the record ids in crash, the
// first Complete (and any Release after it) is never written, as when the
// invocation dies there; the lock stays until it expires.
type crashStore struct {
	store.Store
	mu      sync.Mutex
	crash   map[string]bool // record id → still to crash once
	crashed map[string]bool // lease owner → crashed
}

var errCrashed = errors.New("the processor crashed before its completion")

func (s *crashStore) Complete(ctx context.Context, lease store.Lease, c store.Completion) error {
	s.mu.Lock()
	if s.crash[lease.ID] {
		delete(s.crash, lease.ID)
		s.crashed[lease.Owner] = true
	}
	dead := s.crashed[lease.Owner] // a retry of the write never happens either
	s.mu.Unlock()
	if dead {
		return errCrashed
	}
	return s.Store.Complete(ctx, lease, c)
}

func (s *crashStore) Release(ctx context.Context, lease store.Lease, now time.Time) error {
	s.mu.Lock()
	dead := s.crashed[lease.Owner]
	s.mu.Unlock()
	if dead {
		return errCrashed
	}
	return s.Store.Release(ctx, lease, now)
}

// newStateMachine creates a state machine of type typ on moto_server.
func newStateMachine(t *testing.T, cfg aws.Config, typ sfntypes.StateMachineType) string {
	t.Helper()
	out, err := sfn.NewFromConfig(cfg).CreateStateMachine(testContext(t, time.Minute), &sfn.CreateStateMachineInput{
		Name:       aws.String(mototest.Name("orders")),
		Definition: aws.String(`{"StartAt":"Done","States":{"Done":{"Type":"Pass","End":true}}}`),
		RoleArn:    aws.String("arn:aws:iam::123456789012:role/states-orders"),
		Type:       typ,
	})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.StateMachineArn)
}

// executionsByKey lists the state machine's executions and groups their
// names by the key their input's sqsOnce member carries.
func executionsByKey(t *testing.T, cfg aws.Config, arn string) map[string][]string {
	t.Helper()
	// A bound for a hang, not a speed: a List and a Describe per execution
	// (some 300) on a moto_server other packages share, on a machine that
	// may be busy.
	ctx := testContext(t, 5*time.Minute)
	c := sfn.NewFromConfig(cfg)
	byKey := map[string][]string{}
	p := sfn.NewListExecutionsPaginator(c, &sfn.ListExecutionsInput{StateMachineArn: aws.String(arn)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Executions {
			d, err := c.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: e.ExecutionArn})
			if err != nil {
				t.Fatal(err)
			}
			var in struct {
				SQSOnce struct{ Key, PayloadHash string } `json:"sqsOnce"`
			}
			if err := json.Unmarshal([]byte(aws.ToString(d.Input)), &in); err != nil || in.SQSOnce.Key == "" {
				t.Errorf("execution %s input %s: no sqsOnce key (%v)", aws.ToString(e.Name), aws.ToString(d.Input), err)
			}
			byKey[in.SQSOnce.Key] = append(byKey[in.SQSOnce.Key], aws.ToString(e.Name))
		}
	}
	return byKey
}

// TestStatesTargetOneExecutionPerKey is issue 31's acceptance on
// moto_server through the deployed template: the processor is built from
// the environment the stack gives its function (TARGET=states:<ARN>), on
// the stack's table. 300 keys, a third of them sent twice, are delivered
// in batches by two processors at once; a third of the keys' first
// processor crashes between StartExecution and its completion, so those
// keys (and everything else in their batches) come back after their
// locks expire, as Lambda redelivers a crashed invocation's batch. Every
// key must end with exactly one execution, named after it; a crashed
// key's redelivery completes as already started.
func TestStatesTargetOneExecutionPerKey(t *testing.T) {
	t.Parallel()
	const keys = 300
	cfg := mototest.Config(t)
	machine := newStateMachine(t, cfg, sfntypes.StateMachineTypeStandard)
	st := deploy(t, map[string]string{
		"Target": "states:" + machine, "IdempotencyKey": "body:/orderId", "LockTimeout": "60",
	})
	mainARN, err := st.Output("MainQueueArn")
	if err != nil {
		t.Fatal(err)
	}
	pcfg, err := processorConfig(envconfig.Map(lambdaEnv(st.Functions[processorID])), cfg)
	if err != nil {
		t.Fatalf("processor config from the deployed environment: %v", err)
	}
	if _, ok := pcfg.Target.(*targets.StateMachineTarget); !ok {
		t.Fatalf("deployed processor's Target is %T, want a state machine", pcfg.Target)
	}
	clock := testclock.New(time.Now())
	pcfg.Test.Now = clock.Now
	pcfg.Logger = slog.New(slog.DiscardHandler)
	crash := &crashStore{Store: pcfg.Store, crash: map[string]bool{}, crashed: map[string]bool{}}
	pcfg.Store = crash
	var mu sync.Mutex
	kinds := map[sqsonce.Kind]int{}
	pcfg.OnOutcome = func(_ context.Context, o sqsonce.Outcome) {
		mu.Lock()
		kinds[o.Kind]++
		mu.Unlock()
	}

	// The messages: key o-i once, or twice (another message id) for every
	// third key; the crashing keys are another third.
	var msgs []events.SQSMessage
	crashKeys := 0
	for i := range keys {
		key := fmt.Sprintf("o-%d", i)
		copies := 1 + btoi(i%3 == 0)
		for c := range copies {
			msgs = append(msgs, events.SQSMessage{
				MessageId: fmt.Sprintf("m-%d-%d", i, c), Body: fmt.Sprintf(`{"orderId":%q,"amount":%d}`, key, i),
				Attributes:  map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": "1700000000000"},
				EventSource: "aws:sqs", EventSourceARN: mainARN, AWSRegion: cfg.Region,
			})
		}
		if i%3 == 1 {
			crash.crash[store.RecordID(pcfg.KeyPrefix, key)] = true
			crashKeys++
		}
	}
	// Spread a key's copies apart: batches of 10 taken with a stride.
	var order []events.SQSMessage
	for s := range 7 {
		for j := s; j < len(msgs); j += 7 {
			order = append(order, msgs[j])
		}
	}

	pending := order
	stopped := 0
	for round := 1; len(pending) > 0; round++ {
		if round > 6 {
			t.Fatalf("%d messages still not done after 6 rounds", len(pending))
		}
		// New processors each round: a crashed one's memory (its local
		// cache) is gone with it.
		procs := make([]*sqsonce.Processor, 2)
		for i := range procs {
			if procs[i], err = sqsonce.NewConsumer(pcfg, nil); err != nil {
				t.Fatal(err)
			}
		}
		ctx := invocation(t, clock)
		var next []events.SQSMessage
		var nextMu sync.Mutex
		batches := make(chan []events.SQSMessage)
		var wg sync.WaitGroup
		for _, p := range procs {
			wg.Go(func() {
				for batch := range batches {
					crashedBefore := len(crash.crashedOwners())
					resp, err := p.Handle(ctx, events.SQSEvent{Records: batch})
					if err != nil {
						t.Errorf("Handle: %v", err)
					}
					failed := map[string]bool{}
					for _, f := range resp.BatchItemFailures {
						failed[f.ItemIdentifier] = true
					}
					// A crashed invocation answers nothing: Lambda
					// redelivers its whole batch. (Another processor's
					// crash meanwhile only makes this one redeliver more.)
					dead := len(crash.crashedOwners()) > crashedBefore
					nextMu.Lock()
					for _, r := range batch {
						if dead || failed[r.MessageId] {
							n := r
							n.Attributes = map[string]string{"ApproximateReceiveCount": fmt.Sprint(round + 1), "SentTimestamp": "1700000000000"}
							n.ReceiptHandle = fmt.Sprintf("rh-%s-%d", r.MessageId, round+1)
							next = append(next, n)
						}
					}
					nextMu.Unlock()
				}
			})
		}
		for i := 0; i < len(pending); i += 10 {
			batches <- pending[i:min(i+10, len(pending))]
		}
		close(batches)
		wg.Wait()
		pending = next
		if round == 1 {
			// Half the crashed keys' executions have finished by their
			// redelivery: Step Functions then refuses the name whatever
			// the input, and the processor looks the execution up. The
			// other half are still open: a start with the same input
			// succeeds without starting anything (moto_server, like Step
			// Functions, runs nothing: its executions stay RUNNING).
			half := map[string]bool{}
			for i := 1; i < keys; i += 6 {
				half[fmt.Sprintf("o-%d", i)] = true
			}
			if stopped = stopExecutions(t, cfg, machine, half); stopped != len(half) {
				t.Fatalf("stopped the executions of %d keys, want %d", stopped, len(half))
			}
		}
		// The visibility timeout passes, and with it the crashed locks.
		clock.Advance(2 * time.Minute)
	}

	byKey := executionsByKey(t, cfg, machine)
	names := map[string]bool{}
	for i := range keys {
		key := fmt.Sprintf("o-%d", i)
		if len(byKey[key]) != 1 {
			t.Errorf("key %s has %d executions %v, want exactly 1", key, len(byKey[key]), byKey[key])
		}
		for _, n := range byKey[key] {
			names[n] = true
		}
	}
	if len(byKey) != keys || len(names) != keys {
		t.Errorf("%d keys with executions, %d names; want %d of each", len(byKey), len(names), keys)
	}
	if left := len(crash.crash); left != 0 {
		t.Errorf("%d crashes never happened: the test did not test them", left)
	}
	mu.Lock()
	defer mu.Unlock()
	// A crashed invocation's outcomes (UnrecordedCompletion) would never
	// be reported; the processors after it report each crashed key once:
	// already started if its execution had closed, else processed (Step
	// Functions answered the same input's start with the open execution).
	if kinds[sqsonce.KindAlreadyStarted] != stopped || kinds[sqsonce.KindUnrecordedCompletion] != crashKeys ||
		kinds[sqsonce.KindProcessed] != keys-stopped {
		t.Errorf("outcomes %v: want %d already started, %d crashes, every other key processed", kinds, stopped, crashKeys)
	}
}

// stopExecutions stops the executions whose input carries one of keys, as
// if they had finished, and returns how many keys it stopped (found by
// input, not by name, so that a wrong name fails the test's count, not
// this lookup).
func stopExecutions(t *testing.T, cfg aws.Config, machine string, keys map[string]bool) int {
	t.Helper()
	c := sfn.NewFromConfig(cfg)
	byKey := executionsByKey(t, cfg, machine)
	// The stops' own bound, from after the listing: a bound over both ran
	// out on a loaded machine (the listing describes some 300 executions on
	// a moto_server other packages share).
	ctx := testContext(t, 2*time.Minute)
	stopped := map[string]bool{}
	for key, names := range byKey {
		if !keys[key] {
			continue
		}
		for _, name := range names {
			arn := strings.Replace(machine, ":stateMachine:", ":execution:", 1) + ":" + name
			if _, err := c.StopExecution(ctx, &sfn.StopExecutionInput{ExecutionArn: aws.String(arn)}); err != nil {
				t.Fatal(err)
			}
			stopped[key] = true
		}
	}
	return len(stopped)
}

// invocation is an invocation's context: its deadline two minutes after
// the test clock's now, which is what the processor measures it against.
func invocation(t *testing.T, clock *testclock.Clock) context.Context {
	ctx, cancel := context.WithDeadline(context.Background(), clock.Now().Add(2*time.Minute))
	t.Cleanup(cancel)
	return ctx
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (s *crashStore) crashedOwners() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for o := range s.crashed {
		out = append(out, o)
	}
	return out
}

// TestStatesTargetAnotherPayloadFollowsThePolicy: a key whose execution a
// crashed processor started for one body comes back with another body:
// Step Functions refuses the name, the lookup finds the other payload, and
// the deployed payload-mismatch policy (the operator queue) takes it; the
// key keeps its one execution, with the first body.
func TestStatesTargetAnotherPayloadFollowsThePolicy(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	machine := newStateMachine(t, cfg, sfntypes.StateMachineTypeStandard)
	st := deploy(t, map[string]string{"Target": "states:" + machine, "IdempotencyKey": "body:/orderId", "LockTimeout": "60"})
	mainARN, err := st.Output("MainQueueArn")
	if err != nil {
		t.Fatal(err)
	}
	opURL, err := st.Output("OperatorQueueUrl")
	if err != nil {
		t.Fatal(err)
	}
	pcfg, err := processorConfig(envconfig.Map(lambdaEnv(st.Functions[processorID])), cfg)
	if err != nil {
		t.Fatal(err)
	}
	clock := testclock.New(time.Now())
	pcfg.Test.Now = clock.Now
	pcfg.Logger = slog.New(slog.DiscardHandler)
	crash := &crashStore{Store: pcfg.Store, crash: map[string]bool{store.RecordID(pcfg.KeyPrefix, "o-1"): true}, crashed: map[string]bool{}}
	pcfg.Store = crash
	var outcomes []sqsonce.Outcome
	pcfg.OnOutcome = func(_ context.Context, o sqsonce.Outcome) { outcomes = append(outcomes, o) }
	p, err := sqsonce.NewConsumer(pcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := func(id, body string) events.SQSMessage {
		return events.SQSMessage{MessageId: id, ReceiptHandle: "rh-" + id, Body: body, EventSource: "aws:sqs", EventSourceARN: mainARN, AWSRegion: cfg.Region}
	}
	if _, err := p.Handle(invocation(t, clock), events.SQSEvent{Records: []events.SQSMessage{rec("m1", `{"orderId":"o-1","amount":1}`)}}); err != nil {
		t.Fatal(err)
	}
	if len(crash.crash) != 0 {
		t.Fatal("the first delivery did not reach its completion")
	}
	clock.Advance(2 * time.Minute)
	if p, err = sqsonce.NewConsumer(pcfg, nil); err != nil { // the crashed one is gone
		t.Fatal(err)
	}
	resp, err := p.Handle(invocation(t, clock), events.SQSEvent{Records: []events.SQSMessage{rec("m2", `{"orderId":"o-1","amount":2}`)}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("another payload: failures %v, err %v, outcomes %+v; want it taken by the operator queue", resp.BatchItemFailures, err, outcomes)
	}
	got := mototest.Receive(t, cfg, opURL, 1, 10*time.Second)
	if len(got) != 1 || !strings.Contains(aws.ToString(got[0].Body), `"amount":2`) ||
		aws.ToString(got[0].MessageAttributes[sqsmsg.AttrReason].StringValue) != string(sqsonce.ReasonPayloadMismatch) {
		t.Fatalf("operator queue got %v, want the second body with reason %s", got, sqsonce.ReasonPayloadMismatch)
	}
	byKey := executionsByKey(t, cfg, machine)
	if len(byKey["o-1"]) != 1 {
		t.Errorf("o-1 has executions %v, want exactly 1", byKey["o-1"])
	}
}
