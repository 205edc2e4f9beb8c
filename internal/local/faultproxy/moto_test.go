//go:build integration

package faultproxy_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
)

// startProxy puts a proxy in front of the package's moto_server.
func startProxy(t *testing.T, opts ...faultproxy.Option) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start(mototest.URL(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// retryer is the SDK's standard retryer with a backoff short enough for
// tests and no retry quota, so that a test's retries never run out of tokens.
func retryer(attempts int) aws.Retryer {
	return retry.AddWithMaxBackoffDelay(retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = attempts
		o.RateLimiter = ratelimit.None
	}), 10*time.Millisecond)
}

func dynamoVia(t *testing.T, p *faultproxy.Proxy, attempts int) *dynamodb.Client {
	return dynamodb.NewFromConfig(mototest.Config(t), func(o *dynamodb.Options) {
		o.BaseEndpoint, o.Retryer = aws.String(p.URL), retryer(attempts)
	})
}

func sqsVia(t *testing.T, p *faultproxy.Proxy, attempts int) *sqs.Client {
	return sqs.NewFromConfig(mototest.Config(t), func(o *sqs.Options) {
		o.BaseEndpoint, o.Retryer = aws.String(p.URL), retryer(attempts)
	})
}

func snsVia(t *testing.T, p *faultproxy.Proxy, attempts int) *sns.Client {
	return sns.NewFromConfig(mototest.Config(t), func(o *sns.Options) {
		o.BaseEndpoint, o.Retryer = aws.String(p.URL), retryer(attempts)
	})
}

func str(s string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: s} }

// counter reads item id's attribute n straight from moto_server, or -1 when
// the item does not exist.
func counter(t *testing.T, table, id string) int {
	t.Helper()
	out, err := dynamodb.NewFromConfig(mototest.Config(t)).GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(table), Key: map[string]ddbtypes.AttributeValue{"id": str(id)}, ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatalf("read %s: %v", id, err)
	}
	if out.Item == nil {
		return -1
	}
	n, ok := out.Item["n"].(*ddbtypes.AttributeValueMemberN)
	if !ok {
		return 0
	}
	v, err := strconv.Atoi(n.Value)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestWhatEachFaultDoesToAWrite shows, for each fault on the first attempt,
// whether the write was applied before the SDK retried it: a conditional
// create then fails its retry, and an unconditional increment counts twice.
func TestWhatEachFaultDoesToAWrite(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	table := mototest.NewIdempotencyTable(t, cfg)
	for _, tc := range []struct {
		name   string
		faults []faultproxy.Fault
		// applied: the first attempt took effect, so the retry repeats it.
		applied bool
	}{
		{"Pass", []faultproxy.Fault{faultproxy.Pass}, false},
		{"FailBefore", []faultproxy.Fault{faultproxy.FailBefore}, false},
		{"Throttle twice", []faultproxy.Fault{faultproxy.Throttle, faultproxy.Throttle}, false},
		{"Delay", []faultproxy.Fault{faultproxy.Delay(10 * time.Millisecond)}, false},
		{"FailAfter", []faultproxy.Fault{faultproxy.FailAfter}, true},
		{"ResetAfter", []faultproxy.Fault{faultproxy.ResetAfter}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := startProxy(t)
			client := dynamoVia(t, p, 3)
			ctx := context.Background()
			attempts := 1
			if kind := faultproxy.KindOf(tc.faults[0]); kind != faultproxy.Pass && kind != faultproxy.Delayed {
				attempts += len(tc.faults)
			}

			t.Run("conditional create", func(t *testing.T) {
				id := mototest.Name("create")
				p.Script("PutItem", tc.faults...)
				_, err := client.PutItem(ctx, &dynamodb.PutItemInput{
					TableName:           aws.String(table),
					Item:                map[string]ddbtypes.AttributeValue{"id": str(id)},
					ConditionExpression: aws.String("attribute_not_exists(id)"),
				})
				var ccf *ddbtypes.ConditionalCheckFailedException
				switch {
				case tc.applied && !errors.As(err, &ccf):
					t.Errorf("PutItem error = %v, want ConditionalCheckFailedException: the lost attempt was applied and the retry found the item", err)
				case !tc.applied && err != nil:
					t.Errorf("PutItem error = %v, want success: the failed attempt was not applied", err)
				}
				if counter(t, table, id) < 0 {
					t.Error("the item was not written")
				}
			})

			t.Run("unconditional increment", func(t *testing.T) {
				id := mototest.Name("count")
				p.Script("UpdateItem", tc.faults...)
				_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
					TableName:                 aws.String(table),
					Key:                       map[string]ddbtypes.AttributeValue{"id": str(id)},
					UpdateExpression:          aws.String("ADD n :one"),
					ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":one": &ddbtypes.AttributeValueMemberN{Value: "1"}},
				})
				if err != nil {
					t.Fatalf("UpdateItem: %v", err)
				}
				want := 1
				if tc.applied {
					want = 2
				}
				if got := counter(t, table, id); got != want {
					t.Errorf("counter = %d after one call, want %d", got, want)
				}
			})

			st := p.Stats()
			for _, op := range []string{"PutItem", "UpdateItem"} {
				if st.Requests[op] != attempts {
					t.Errorf("%s reached the proxy %d times, want %d (the first attempt and its retries)", op, st.Requests[op], attempts)
				}
				wantForwarded := 1
				if tc.applied {
					wantForwarded = 2
				}
				if st.Forwarded[op] != wantForwarded {
					t.Errorf("%s forwarded %d times, want %d", op, st.Forwarded[op], wantForwarded)
				}
			}
			if p.Pending() != 0 {
				t.Errorf("%d scripted faults never applied", p.Pending())
			}
		})
	}
}

// TestExhaustedRetriesSurfaceTheServiceError shows that the injected errors
// are the services' own: the SDK decodes them into its error types and its
// retryer classifies them as it would in AWS.
func TestExhaustedRetriesSurfaceTheServiceError(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	table := mototest.NewIdempotencyTable(t, cfg)
	queue := mototest.NewQueue(t, cfg, false, nil)
	const attempts = 3
	for _, tc := range []struct {
		name     string
		fault    faultproxy.Kind
		op       string
		call     func(*testing.T, *faultproxy.Proxy) error
		typed    func(error) bool // errors.As on the SDK's modelled type
		code     string
		throttle bool
	}{
		{
			name: "DynamoDB FailBefore", fault: faultproxy.FailBefore, op: "PutItem",
			call: func(t *testing.T, p *faultproxy.Proxy) error { return putItem(t, p, table, attempts) },
			typed: func(err error) bool {
				var e *ddbtypes.InternalServerError
				return errors.As(err, &e)
			},
			code: "InternalServerError",
		},
		{
			name: "DynamoDB FailAfter", fault: faultproxy.FailAfter, op: "PutItem",
			call: func(t *testing.T, p *faultproxy.Proxy) error { return putItem(t, p, table, attempts) },
			typed: func(err error) bool {
				var e *ddbtypes.InternalServerError
				return errors.As(err, &e)
			},
			code: "InternalServerError",
		},
		{
			name: "DynamoDB ResetAfter", fault: faultproxy.ResetAfter, op: "PutItem",
			call: func(t *testing.T, p *faultproxy.Proxy) error { return putItem(t, p, table, attempts) },
			typed: func(err error) bool {
				var e *smithyhttp.RequestSendError
				return errors.As(err, &e) && errors.Is(err, syscall.ECONNRESET)
			},
			code: "", // a connection error, not an answer
		},
		{
			name: "DynamoDB Throttle", fault: faultproxy.Throttle, op: "PutItem",
			call: func(t *testing.T, p *faultproxy.Proxy) error { return putItem(t, p, table, attempts) },
			typed: func(err error) bool {
				var e *ddbtypes.ProvisionedThroughputExceededException
				return errors.As(err, &e)
			},
			code: "ProvisionedThroughputExceededException", throttle: true,
		},
		{
			name: "SQS Throttle", fault: faultproxy.Throttle, op: "SendMessage",
			call: func(t *testing.T, p *faultproxy.Proxy) error { return sendMessage(t, p, queue, attempts) },
			typed: func(err error) bool {
				var e *sqstypes.RequestThrottled
				return errors.As(err, &e)
			},
			code: "RequestThrottled", throttle: true,
		},
		{
			name: "SQS FailBefore", fault: faultproxy.FailBefore, op: "SendMessage",
			call: func(t *testing.T, p *faultproxy.Proxy) error { return sendMessage(t, p, queue, attempts) },
			code: "InternalFailure",
		},
		{
			name: "SNS (query protocol) Throttle", fault: faultproxy.Throttle, op: "ListTopics",
			call: func(t *testing.T, p *faultproxy.Proxy) error {
				_, err := snsVia(t, p, attempts).ListTopics(context.Background(), &sns.ListTopicsInput{})
				return err
			},
			code: "Throttling", throttle: true,
		},
		{
			name: "SNS (query protocol) FailBefore", fault: faultproxy.FailBefore, op: "ListTopics",
			call: func(t *testing.T, p *faultproxy.Proxy) error {
				_, err := snsVia(t, p, attempts).ListTopics(context.Background(), &sns.ListTopicsInput{})
				return err
			},
			code: "InternalFailure",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := startProxy(t)
			p.Script(tc.op, slices.Repeat([]faultproxy.Fault{tc.fault}, attempts)...)
			err := tc.call(t, p)
			if err == nil {
				t.Fatal("the call succeeded through a fault on every attempt")
			}
			if tc.typed != nil && !tc.typed(err) {
				t.Errorf("error %v (%T) is not the service's modelled type", err, errors.Unwrap(err))
			}
			var api smithy.APIError
			if isAPI := errors.As(err, &api); isAPI != (tc.code != "") || (isAPI && api.ErrorCode() != tc.code) {
				t.Errorf("error %v: want API error code %q", err, tc.code)
			}
			if got := retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err); got.Bool() != tc.throttle {
				t.Errorf("IsErrorThrottle = %v, want %v", got, tc.throttle)
			}
			if got := retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err); got != aws.TrueTernary {
				t.Errorf("IsErrorRetryable = %v: the SDK would not retry this fault", got)
			}
			if st := p.Stats(); st.Requests[tc.op] != attempts {
				t.Errorf("%s reached the proxy %d times, want %d: the SDK did not retry", tc.op, st.Requests[tc.op], attempts)
			}
		})
	}
}

func putItem(t *testing.T, p *faultproxy.Proxy, table string, attempts int) error {
	_, err := dynamoVia(t, p, attempts).PutItem(context.Background(), &dynamodb.PutItemInput{
		TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{"id": str(mototest.Name("item"))},
	})
	return err
}

func sendMessage(t *testing.T, p *faultproxy.Proxy, queue string, attempts int) error {
	_, err := sqsVia(t, p, attempts).SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(queue), MessageBody: aws.String("hello")})
	return err
}

// TestDelayPastTheDeadline shows that a caller whose deadline is shorter than
// the delay gets a deadline error, and that a request whose caller gave up is
// never forwarded.
func TestDelayPastTheDeadline(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	table := mototest.NewIdempotencyTable(t, cfg)
	for _, tc := range []struct {
		name         string
		delay, limit time.Duration
		wantErr      error
	}{
		{"delay beyond the deadline", 2 * time.Second, 100 * time.Millisecond, context.DeadlineExceeded},
		{"delay within the deadline", 10 * time.Millisecond, time.Minute, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := startProxy(t)
			p.Script("PutItem", faultproxy.Delay(tc.delay))
			id := mototest.Name("late")
			ctx, cancel := context.WithTimeout(context.Background(), tc.limit)
			defer cancel()
			_, err := dynamoVia(t, p, 3).PutItem(ctx, &dynamodb.PutItemInput{
				TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{"id": str(id)},
			})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("PutItem error = %v, want %v", err, tc.wantErr)
			}
			// Close waits for the delayed request's handler to end, so what
			// it forwarded is final.
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			waited := tc.wantErr == nil
			if written := counter(t, table, id) >= 0; written != waited {
				t.Errorf("item written: %v, want %v", written, waited)
			}
			if fwd := p.Stats().Forwarded["PutItem"]; (fwd == 1) != waited || fwd > 1 {
				t.Errorf("PutItem forwarded %d times; want once if the caller waited, else never", fwd)
			}
		})
	}
}

// TestLostSendResponseDuplicatesTheMessage is the duplicate-send limit: when
// SendMessage's response is lost the SDK sends again, and a standard queue
// keeps both copies; a FIFO queue drops the retry by its deduplication ID.
func TestLostSendResponseDuplicatesTheMessage(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	for _, tc := range []struct {
		name   string
		fifo   bool
		copies int
	}{
		{"standard queue", false, 2},
		{"FIFO queue with a deduplication ID", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			queue := mototest.NewQueue(t, cfg, tc.fifo, nil)
			p := startProxy(t)
			p.Script("SendMessage", faultproxy.FailAfter)
			in := &sqs.SendMessageInput{QueueUrl: aws.String(queue), MessageBody: aws.String("order-42")}
			if tc.fifo {
				in.MessageGroupId, in.MessageDeduplicationId = aws.String("g"), aws.String("order-42")
			}
			if _, err := sqsVia(t, p, 3).SendMessage(context.Background(), in); err != nil {
				t.Fatalf("SendMessage: %v (the retry should have succeeded)", err)
			}
			if st := p.Stats(); st.Forwarded["SendMessage"] != 2 {
				t.Fatalf("SendMessage forwarded %d times, want 2", st.Forwarded["SendMessage"])
			}
			// moto counts messages exactly, so the count is final at once.
			attrs, err := sqs.NewFromConfig(cfg).GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
				QueueUrl: aws.String(queue), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages},
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := attrs.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)]; got != strconv.Itoa(tc.copies) {
				t.Errorf("queue holds %s messages after one SendMessage call, want %d", got, tc.copies)
			}
		})
	}
}

// TestScriptWhenTargetsOneRequest aims a fault at the UpdateItem that marks a
// record COMPLETED and at no other.
func TestScriptWhenTargetsOneRequest(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	table := mototest.NewIdempotencyTable(t, cfg)
	p := startProxy(t)
	p.ScriptWhen("UpdateItem", faultproxy.BodyContains("COMPLETED"), faultproxy.FailBefore)
	client := dynamoVia(t, p, 1)
	id := mototest.Name("rec")
	for _, status := range []string{"PROCESSING", "COMPLETED"} {
		_, err := client.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
			TableName:                 aws.String(table),
			Key:                       map[string]ddbtypes.AttributeValue{"id": str(id)},
			UpdateExpression:          aws.String("SET #s = :s"),
			ExpressionAttributeNames:  map[string]string{"#s": "status"},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":s": str(status)},
		})
		var ise *ddbtypes.InternalServerError
		if failed := errors.As(err, &ise); failed != (status == "COMPLETED") {
			t.Errorf("UpdateItem to %s: error %v", status, err)
		}
	}
	if st := p.Stats(); st.Faults[faultproxy.FailBefore] != 1 || st.Forwarded["UpdateItem"] != 1 {
		t.Errorf("stats %+v: want one FailBefore and the PROCESSING update forwarded", st)
	}
}

// TestRandomFaultsAreReproducible runs the same calls through two proxies with
// one seed and gets the same faults, and a different sequence with another.
func TestRandomFaultsAreReproducible(t *testing.T) {
	t.Parallel()
	rates := faultproxy.Rates{FailBefore: 0.1, FailAfter: 0.1, ResetAfter: 0.1, Throttle: 0.1, Delay: 0.1, MaxDelay: 2 * time.Millisecond}
	run := func(seed uint64) []string {
		var mu sync.Mutex
		var seq []string
		p := startProxy(t,
			faultproxy.WithRandom(rates, rand.New(rand.NewPCG(seed, 0))),
			faultproxy.WithObserver(func(op string, _ []byte, _ http.Header, f faultproxy.Fault) {
				mu.Lock()
				defer mu.Unlock()
				seq = append(seq, op+":"+f.String())
			}))
		// One attempt per call and one call at a time: the requests arrive in
		// the same order on every run, whatever their faults.
		client := dynamodb.NewFromConfig(mototest.Config(t), func(o *dynamodb.Options) {
			o.BaseEndpoint, o.Retryer = aws.String(p.URL), aws.NopRetryer{}
		})
		for range 60 {
			_, _ = client.ListTables(context.Background(), &dynamodb.ListTablesInput{})
		}
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seq)
	}
	a, b := run(7), run(7)
	if !slices.Equal(a, b) {
		t.Fatalf("seed 7 gave two sequences:\n%v\n%v", a, b)
	}
	if len(a) != 60 {
		t.Errorf("%d requests observed, want 60", len(a))
	}
	if slices.Equal(a, run(8)) {
		t.Error("seeds 7 and 8 gave the same 60 faults")
	}
}

// TestConcurrentRequestsUnderRandomFaults runs many SDK clients' calls through
// one proxy at once (with -race) and checks that the counts add up: every
// call succeeds once, after as many retries as it drew faults.
func TestConcurrentRequestsUnderRandomFaults(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	table := mototest.NewIdempotencyTable(t, cfg)
	p := startProxy(t, faultproxy.WithRandom(
		faultproxy.Rates{FailBefore: 0.08, FailAfter: 0.08, ResetAfter: 0.08, Throttle: 0.08, Delay: 0.08, MaxDelay: 5 * time.Millisecond, Ops: []string{"PutItem"}},
		rand.New(rand.NewPCG(42, 0))))
	const workers, each = 16, 10
	client := dynamoVia(t, p, 30)
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				_, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{
					TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{"id": str(fmt.Sprintf("w%d-%d", w, i))},
				})
				if err != nil {
					errs <- err
				}
				_ = p.Stats() // a reader racing the writers
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("PutItem: %v", err)
	}
	st := p.Stats()
	req, fwd := st.Requests["PutItem"], st.Forwarded["PutItem"]
	if notForwarded := st.Faults[faultproxy.FailBefore] + st.Faults[faultproxy.Throttle]; req != fwd+notForwarded {
		t.Errorf("requests %d != forwarded %d + answered by the proxy %d", req, fwd, notForwarded)
	}
	if answered := fwd - st.Faults[faultproxy.FailAfter] - st.Faults[faultproxy.ResetAfter]; answered != workers*each {
		t.Errorf("%d forwarded requests got moto's answer, want one per call (%d)", answered, workers*each)
	}
	if req == workers*each {
		t.Errorf("no faults injected: %+v", st)
	}
	out, err := dynamodb.NewFromConfig(cfg).Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table), Select: ddbtypes.SelectCount})
	if err != nil {
		t.Fatal(err)
	}
	if out.Count != workers*each {
		t.Errorf("table holds %d items, want %d", out.Count, workers*each)
	}
}
