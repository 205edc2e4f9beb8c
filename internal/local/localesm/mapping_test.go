package localesm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

const fakeARN = "arn:aws:sqs:eu-west-3:123456789012:orders"

// fakeSQS serves prepared receive results, then long-polls (blocks) until the
// caller's context ends, as an empty queue does. It records deletes and can
// fail chosen delete entries or whole delete calls.
type fakeSQS struct {
	mu          sync.Mutex
	receives    [][]sqstypes.Message
	inputs      []*sqs.ReceiveMessageInput
	deleted     []string // receipt handles
	failEntry   map[string]bool
	failCalls   int // the next failCalls DeleteMessageBatch calls fail
	deleteCalls int
	// visibility is the queue's VisibilityTimeout attribute; "30" when empty.
	visibility string
}

func (f *fakeSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.mu.Lock()
	f.inputs = append(f.inputs, in)
	if len(f.receives) > 0 {
		msgs := f.receives[0]
		f.receives = f.receives[1:]
		f.mu.Unlock()
		return &sqs.ReceiveMessageOutput{Messages: msgs}, nil
	}
	f.mu.Unlock()
	<-ctx.Done()
	return nil, ctx.Err()
}

func (f *fakeSQS) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleteCalls++
	if len(in.Entries) > 10 {
		return nil, fmt.Errorf("TooManyEntriesInBatchRequest: %d", len(in.Entries))
	}
	if f.failCalls > 0 {
		f.failCalls--
		return nil, errors.New("InternalError: injected")
	}
	out := &sqs.DeleteMessageBatchOutput{}
	for _, e := range in.Entries {
		rh := aws.ToString(e.ReceiptHandle)
		if f.failEntry[rh] {
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), Message: aws.String("injected")})
			continue
		}
		f.deleted = append(f.deleted, rh)
		out.Successful = append(out.Successful, sqstypes.DeleteMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (f *fakeSQS) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	vis := f.visibility
	if vis == "" {
		vis = "30"
	}
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"QueueArn": fakeARN, "VisibilityTimeout": vis}}, nil
}

func (f *fakeSQS) deletedHandles() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Clone(f.deleted)
	slices.Sort(out)
	return out
}

func msgs(ids ...string) []sqstypes.Message {
	out := make([]sqstypes.Message, len(ids))
	for i, id := range ids {
		out[i] = sqstypes.Message{
			MessageId:     aws.String(id),
			ReceiptHandle: aws.String("rh-" + id),
			Body:          aws.String("body of " + id),
			Attributes:    map[string]string{"ApproximateReceiveCount": "1"},
		}
	}
	return out
}

type bundle struct {
	api     *fakeSQS
	mapping *Mapping
	invs    chan Invocation
}

// setup builds a Mapping over a fake queue that serves the given receives,
// with one poller so invocations are in order.
func setup(t *testing.T, cfg Config, h Handler, receives ...[]sqstypes.Message) *bundle {
	t.Helper()
	b := &bundle{api: &fakeSQS{receives: receives, failEntry: map[string]bool{}}, invs: make(chan Invocation, 100)}
	cfg.QueueURL = "https://sqs.eu-west-3.amazonaws.com/123456789012/orders"
	if cfg.Pollers == 0 {
		cfg.Pollers = 1
	}
	cfg.OnInvoke = func(inv Invocation) { b.invs <- inv }
	m, err := New(b.api, cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	b.mapping = m
	return b
}

// run starts the mapping, waits for n invocations and stops it.
func (b *bundle) run(t *testing.T, n int) []Invocation {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.mapping.Run(ctx) }()
	var got []Invocation
	timeout := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case inv := <-b.invs:
			got = append(got, inv)
		case <-timeout:
			cancel()
			t.Fatalf("got %d invocations, want %d", len(got), n)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	return got
}

func fail(ids ...string) events.SQSEventResponse {
	var r events.SQSEventResponse
	for _, id := range ids {
		r.BatchItemFailures = append(r.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
	}
	return r
}

func TestInvocationOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		handler     Handler
		wantDeleted []string
		wantErr     error
		// ignoreResponse leaves ReportBatchItemFailures off, as a mapping
		// without FunctionResponseTypes.
		ignoreResponse bool
	}{
		{
			name:        "success deletes every record",
			handler:     func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) { return fail(), nil },
			wantDeleted: []string{"rh-a", "rh-b", "rh-c"},
		},
		{
			name:        "batchItemFailures are left, the rest deleted",
			handler:     func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) { return fail("b"), nil },
			wantDeleted: []string{"rh-a", "rh-c"},
		},
		{
			name: "handler error leaves the whole batch",
			handler: func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
				return fail(), errors.New("boom")
			},
		},
		{
			name: "panic leaves the whole batch",
			handler: func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
				panic("nil map")
			},
			wantErr: ErrPanic,
		},
		{
			name:    "empty itemIdentifier fails the batch as in Lambda",
			handler: func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) { return fail(""), nil },
			wantErr: ErrInvalidResponse,
		},
		{
			name: "unknown itemIdentifier fails the batch as in Lambda",
			handler: func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
				return fail("rh-a"), nil // a receipt handle is not a message id
			},
			wantErr: ErrInvalidResponse,
		},
		{
			name:           "without ReportBatchItemFailures a success deletes the whole batch",
			handler:        func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) { return fail("b"), nil },
			wantDeleted:    []string{"rh-a", "rh-b", "rh-c"},
			ignoreResponse: true,
		},
		{
			name:           "without ReportBatchItemFailures an invalid response is not even read",
			handler:        func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) { return fail(""), nil },
			wantDeleted:    []string{"rh-a", "rh-b", "rh-c"},
			ignoreResponse: true,
		},
		{
			name: "without ReportBatchItemFailures an error still leaves the whole batch",
			handler: func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
				return fail(), errors.New("boom")
			},
			ignoreResponse: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{ReportBatchItemFailures: !tt.ignoreResponse}, tt.handler, msgs("a", "b", "c"))
			inv := b.run(t, 1)[0]
			if got := b.api.deletedHandles(); !slices.Equal(got, tt.wantDeleted) {
				t.Errorf("deleted %v, want %v", got, tt.wantDeleted)
			}
			if len(inv.Deleted)+len(inv.Left) != 3 {
				t.Errorf("deleted %v + left %v do not account for 3 records", inv.Deleted, inv.Left)
			}
			if tt.wantDeleted == nil && inv.Err == nil {
				t.Error("Invocation.Err is nil for a failed batch")
			}
			if tt.wantErr != nil && !errors.Is(inv.Err, tt.wantErr) {
				t.Errorf("Invocation.Err = %v, want %v", inv.Err, tt.wantErr)
			}
		})
	}
}

// TestTimeoutAbandonsTheInvocation runs in a synctest bubble: the 20 ms
// timeout passes on the bubble's clock, and synctest.Wait tells when every
// goroutine left is blocked, so "Run has not returned" is a fact, not a race.
func TestTimeoutAbandonsTheInvocation(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		sawDeadline := make(chan bool, 1)
		h := func(ctx context.Context, _ events.SQSEvent) (events.SQSEventResponse, error) {
			_, hasDeadline := ctx.Deadline()
			<-ctx.Done() // the deadline passes while the function still works
			sawDeadline <- hasDeadline
			<-release // then it hangs, like a frozen sandbox
			return fail(), nil
		}
		b := setup(t, Config{Timeout: 20 * time.Millisecond}, h, msgs("a", "b"))

		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- b.mapping.Run(ctx) }()
		inv := <-b.invs
		if !errors.Is(inv.Err, ErrTimeout) {
			t.Fatalf("Err = %v, want ErrTimeout", inv.Err)
		}
		if !<-sawDeadline {
			t.Error("handler context had no deadline")
		}
		if got := b.api.deletedHandles(); len(got) != 0 || !slices.Equal(inv.Left, []string{"a", "b"}) {
			t.Errorf("timed-out invocation deleted %v, left %v; want nothing deleted, both left", got, inv.Left)
		}
		cancel()
		synctest.Wait() // the pollers have stopped; only the abandoned handler holds Run
		select {
		case <-done:
			t.Fatal("Run returned while an abandoned handler was still running")
		default:
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

func TestStopLetsTheInvocationFinishAndDelete(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	proceed := make(chan struct{})
	h := func(ctx context.Context, _ events.SQSEvent) (events.SQSEventResponse, error) {
		close(started)
		<-proceed
		if ctx.Err() != nil {
			return fail(), fmt.Errorf("invocation context cancelled by the stop: %w", ctx.Err())
		}
		return fail(), nil
	}
	b := setup(t, Config{Timeout: 20 * time.Second}, h, msgs("a"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.mapping.Run(ctx) }()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("Run returned %v before invoking", err)
	}
	cancel()
	close(proceed)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	inv := <-b.invs
	if inv.Err != nil {
		t.Fatal(inv.Err)
	}
	if got := b.api.deletedHandles(); !slices.Equal(got, []string{"rh-a"}) {
		t.Errorf("deleted %v after stop, want [rh-a]", got)
	}
}

func TestDeleteFailures(t *testing.T) {
	t.Parallel()
	ok := func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) { return fail(), nil }

	t.Run("failed entry is left, others deleted", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Config{}, ok, msgs("a", "b"))
		b.api.failEntry["rh-b"] = true
		inv := b.run(t, 1)[0]
		if inv.Err != nil {
			t.Errorf("Err = %v; a delete failure is not a handler failure", inv.Err)
		}
		if !slices.Equal(inv.Deleted, []string{"a"}) || !slices.Equal(inv.Left, []string{"b"}) || inv.DeleteErr == nil {
			t.Errorf("deleted %v left %v err %v, want [a] [b] and an error", inv.Deleted, inv.Left, inv.DeleteErr)
		}
	})
	t.Run("a failed call is retried", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Config{}, ok, msgs("a"))
		b.api.failCalls = deleteAttempts - 1
		inv := b.run(t, 1)[0]
		if !slices.Equal(inv.Deleted, []string{"a"}) || inv.DeleteErr != nil {
			t.Errorf("deleted %v err %v after transient failures", inv.Deleted, inv.DeleteErr)
		}
	})
	t.Run("a call failing every attempt leaves its records", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Config{}, ok, msgs("a"))
		b.api.failCalls = deleteAttempts
		inv := b.run(t, 1)[0]
		if len(inv.Deleted) != 0 || !slices.Equal(inv.Left, []string{"a"}) || inv.DeleteErr == nil {
			t.Errorf("deleted %v left %v err %v", inv.Deleted, inv.Left, inv.DeleteErr)
		}
	})
}

func TestLargeBatchesAreDeletedInChunksOfTen(t *testing.T) {
	t.Parallel()
	var ids []string
	for i := range 25 {
		ids = append(ids, fmt.Sprintf("m%02d", i))
	}
	all := msgs(ids...)
	var sizes []int
	h := func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		sizes = append(sizes, len(ev.Records))
		return fail(), nil
	}
	// Three receives of 10, 10 and 5 inside the batching window make one batch.
	b := setup(t, Config{BatchSize: 25, BatchingWindow: 5 * time.Second}, h, all[:10], all[10:20], all[20:])
	inv := b.run(t, 1)[0]
	if !slices.Equal(sizes, []int{25}) {
		t.Errorf("invocation sizes %v, want one batch of 25", sizes)
	}
	if len(inv.Deleted) != 25 || b.api.deleteCalls != 3 {
		t.Errorf("deleted %d in %d calls, want 25 in 3", len(inv.Deleted), b.api.deleteCalls)
	}
	for i, in := range b.api.inputs[:3] {
		if want := int32(min(10, 25-10*i)); in.MaxNumberOfMessages != want {
			t.Errorf("receive %d asked for %d messages, want %d", i, in.MaxNumberOfMessages, want)
		}
	}
}

func TestWithoutWindowOneReceiveMakesOneBatch(t *testing.T) {
	t.Parallel()
	var sizes []int
	h := func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		sizes = append(sizes, len(ev.Records))
		return fail(), nil
	}
	b := setup(t, Config{BatchSize: 10}, h, msgs("a", "b"), msgs("c"))
	b.run(t, 2)
	if !slices.Equal(sizes, []int{2, 1}) {
		t.Errorf("invocation sizes %v, want [2 1]", sizes)
	}
	in := b.api.inputs[0]
	if in.WaitTimeSeconds != 20 || in.VisibilityTimeout != 0 ||
		!slices.Equal(in.MessageAttributeNames, []string{"All"}) ||
		!slices.Equal(in.MessageSystemAttributeNames, []sqstypes.MessageSystemAttributeName{"All"}) {
		t.Errorf("receive input %+v: want a 20 s long poll of every attribute, queue's own visibility timeout", in)
	}
}

func TestLambdaContext(t *testing.T) {
	t.Parallel()
	var lc *lambdacontext.LambdaContext
	h := func(ctx context.Context, _ events.SQSEvent) (events.SQSEventResponse, error) {
		lc, _ = lambdacontext.FromContext(ctx)
		return fail(), nil
	}
	b := setup(t, Config{FunctionName: "processor"}, h, msgs("a"))
	inv := b.run(t, 1)[0]
	if lc == nil || lc.AwsRequestID != inv.RequestID || len(lc.AwsRequestID) != 36 {
		t.Fatalf("lambdacontext %+v, invocation request id %q", lc, inv.RequestID)
	}
	if want := "arn:aws:lambda:eu-west-3:123456789012:function:processor"; lc.InvokedFunctionArn != want {
		t.Errorf("InvokedFunctionArn %q, want %q", lc.InvokedFunctionArn, want)
	}
	if rec := inv.Records[0]; rec.EventSourceARN != fakeARN || rec.AWSRegion != "eu-west-3" || rec.EventSource != "aws:sqs" {
		t.Errorf("record source %q %q %q", rec.EventSourceARN, rec.AWSRegion, rec.EventSource)
	}
}

// TestCheckRefusesATimeoutLongerThanTheVisibility: Lambda refuses such a
// mapping, because the records would come back while their invocation runs.
func TestCheckRefusesATimeoutLongerThanTheVisibility(t *testing.T) {
	t.Parallel()
	h := func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) { return fail(), nil }
	tests := []struct {
		visibility string
		timeout    time.Duration
		want       string // "" means accepted
	}{
		{"5", 5 * time.Second, ""},
		{"5", 4 * time.Second, ""},
		{"5", 6 * time.Second, "longer than the visibility timeout 5s"},
		{"0", time.Second, "longer than the visibility timeout 0s"},
		{"", 3 * time.Second, ""}, // the fake's default, 30 s
		{"soon", time.Second, "no valid VisibilityTimeout"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s", tt.visibility, tt.timeout), func(t *testing.T) {
			t.Parallel()
			api := &fakeSQS{visibility: tt.visibility}
			m, err := New(api, Config{QueueURL: "https://sqs/q", Timeout: tt.timeout}, h)
			if err != nil {
				t.Fatal(err)
			}
			err = m.Check(context.Background())
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Check: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Check: %v, want an error with %q", err, tt.want)
			case strings.Contains(tt.want, "longer") && !errors.Is(err, ErrConfig):
				t.Errorf("Check: %v does not wrap ErrConfig", err)
			}
			if tt.want != "" {
				// Run refuses too, without polling.
				if err := m.Run(context.Background()); err == nil {
					t.Error("Run started a mapping Check refused")
				}
				if len(api.inputs) != 0 {
					t.Errorf("Run polled %d times after a refused Check", len(api.inputs))
				}
			}
		})
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	h := func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) { return fail(), nil }
	tests := []struct {
		name string
		cfg  Config
		want string // substring of the error; "" means valid
	}{
		{"defaults", Config{QueueURL: "u"}, ""},
		{"no queue", Config{}, "QueueURL"},
		{"batch too large", Config{QueueURL: "u", BatchSize: 10001, BatchingWindow: time.Second}, "BatchSize 10001"},
		{"batch above 10 without window", Config{QueueURL: "u", BatchSize: 11}, "needs a BatchingWindow"},
		{"negative pollers", Config{QueueURL: "u", Pollers: -1}, "Pollers"},
		{"window too long", Config{QueueURL: "u", BatchingWindow: 301 * time.Second}, "BatchingWindow"},
		{"wait too long", Config{QueueURL: "u", WaitTime: 21 * time.Second}, "WaitTime"},
		{"negative timeout", Config{QueueURL: "u", Timeout: -time.Second}, "Timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(&fakeSQS{}, tt.cfg, h)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tt.want != "" && (err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want ErrConfig mentioning %q", err, tt.want)
			}
		})
	}
}
