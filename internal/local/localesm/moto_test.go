//go:build integration

package localesm

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
)

func TestMain(m *testing.M) { mototest.Main(m) }

// motoBundle is a Mapping running against moto_server until the test ends.
type motoBundle struct {
	client *sqs.Client
	invs   chan Invocation
}

func startMapping(t *testing.T, client *sqs.Client, cfg Config, h Handler) *motoBundle {
	t.Helper()
	b := &motoBundle{client: client, invs: make(chan Invocation, 1000)}
	cfg.OnInvoke = func(inv Invocation) { b.invs <- inv }
	cfg.WaitTime = time.Second
	m, err := New(client, cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return b
}

func (b *motoBundle) next(t *testing.T) Invocation {
	t.Helper()
	select {
	case inv := <-b.invs:
		return inv
	case <-time.After(20 * time.Second):
		t.Fatal("no invocation within 20 s")
		return Invocation{}
	}
}

// keyPaths lists every JSON object key path in v ("Records.attributes.SenderId").
func keyPaths(prefix string, v any, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			out[p] = true
			keyPaths(p, child, out)
		}
	case []any:
		for _, child := range x {
			keyPaths(prefix, child, out)
		}
	}
}

func pathsOf(t *testing.T, v any) []string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	keyPaths("", generic, set)
	return slices.Sorted(maps.Keys(set))
}

// TestEventShapeMatchesLambda sends the messages of testdata/lambda-sqs-event.json
// (a Lambda SQS event, standard and FIFO record) to moto and compares the event
// the mapping builds, field name by field name, with it.
func TestEventShapeMatchesLambda(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/lambda-sqs-event.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden struct{ Records []map[string]any }
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	var typed events.SQSEvent
	if err := json.Unmarshal(raw, &typed); err != nil {
		t.Fatalf("golden does not decode into events.SQSEvent: %v", err)
	}
	// The golden's record fields are exactly aws-lambda-go's, so the file
	// cannot drift from the type lambda.Start decodes into.
	for i, rec := range golden.Records {
		var lib map[string]any
		raw, _ := json.Marshal(events.SQSMessage{})
		_ = json.Unmarshal(raw, &lib)
		if got, want := slices.Sorted(maps.Keys(rec)), slices.Sorted(maps.Keys(lib)); !slices.Equal(got, want) {
			t.Fatalf("golden record %d has fields %v, aws-lambda-go's events.SQSMessage %v", i, got, want)
		}
	}

	cfg := mototest.Config(t)
	client := sqs.NewFromConfig(cfg)
	for i, fifo := range []bool{false, true} {
		t.Run(fmt.Sprintf("fifo=%v", fifo), func(t *testing.T) {
			t.Parallel()
			want := typed.Records[i]
			url := mototest.NewQueue(t, cfg, fifo, nil)
			in := &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(want.Body), MessageAttributes: map[string]sqstypes.MessageAttributeValue{}}
			for name, a := range want.MessageAttributes {
				in.MessageAttributes[name] = sqstypes.MessageAttributeValue{DataType: aws.String(a.DataType), StringValue: a.StringValue, BinaryValue: a.BinaryValue}
			}
			if fifo {
				in.MessageGroupId = aws.String(want.Attributes["MessageGroupId"])
				in.MessageDeduplicationId = aws.String(want.Attributes["MessageDeduplicationId"])
			}
			if _, err := client.SendMessage(context.Background(), in); err != nil {
				t.Fatal(err)
			}
			got := make(chan events.SQSEvent, 1)
			startMapping(t, client, Config{QueueURL: url}, func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
				got <- ev
				return events.SQSEventResponse{}, nil
			})
			ev := <-got
			if len(ev.Records) != 1 {
				t.Fatalf("%d records, want 1", len(ev.Records))
			}
			rec := ev.Records[0]

			gotPaths := pathsOf(t, events.SQSEvent{Records: []events.SQSMessage{rec}})
			wantPaths := pathsOf(t, map[string]any{"Records": []any{golden.Records[i]}})
			if !slices.Equal(gotPaths, wantPaths) {
				t.Errorf("JSON field names differ from Lambda's event\n got: %v\nwant: %v", gotPaths, wantPaths)
			}

			sum := md5.Sum([]byte(want.Body))
			arn := queueARN(t, client, url)
			if rec.Body != want.Body || rec.Md5OfBody != hex.EncodeToString(sum[:]) || rec.EventSource != "aws:sqs" ||
				rec.EventSourceARN != arn || rec.AWSRegion != motoserver.Region || rec.MessageId == "" || rec.ReceiptHandle == "" {
				t.Errorf("record %+v: wrong body, md5OfBody, source, ARN (%s) or region", rec, arn)
			}
			if rec.Attributes["ApproximateReceiveCount"] != "1" {
				t.Errorf("ApproximateReceiveCount %q, want 1", rec.Attributes["ApproximateReceiveCount"])
			}
			for _, k := range []string{"SentTimestamp", "ApproximateFirstReceiveTimestamp"} {
				if _, err := strconv.ParseInt(rec.Attributes[k], 10, 64); err != nil {
					t.Errorf("%s %q is not epoch milliseconds", k, rec.Attributes[k])
				}
			}
			if fifo && (rec.Attributes["MessageGroupId"] != "customer-7" || rec.Attributes["MessageDeduplicationId"] != "order-2" || rec.Attributes["SequenceNumber"] == "") {
				t.Errorf("FIFO attributes %v", rec.Attributes)
			}
			for name, w := range want.MessageAttributes {
				g := rec.MessageAttributes[name]
				if g.DataType != w.DataType || aws.ToString(g.StringValue) != aws.ToString(w.StringValue) || !slices.Equal(g.BinaryValue, w.BinaryValue) {
					t.Errorf("attribute %s = %+v, want %+v", name, g, w)
				}
			}
			// Binary values travel base64-encoded, as in Lambda's event.
			if !fifo {
				wire, _ := json.Marshal(rec)
				var m map[string]any
				_ = json.Unmarshal(wire, &m)
				digest := m["messageAttributes"].(map[string]any)["digest"].(map[string]any)
				if digest["binaryValue"] != "AAEC/w==" {
					t.Errorf("binaryValue on the wire %v, want base64 AAEC/w==", digest["binaryValue"])
				}
			}
		})
	}
}

func queueARN(t *testing.T, client *sqs.Client, url string) string {
	t.Helper()
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes["QueueArn"]
}

func sendN(t *testing.T, client *sqs.Client, url string, n int) {
	t.Helper()
	for start := 0; start < n; start += 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for i := start; i < min(start+10, n); i++ {
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(fmt.Sprintf("m%03d", i))})
		}
		out, err := client.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil || len(out.Failed) > 0 {
			t.Fatalf("send: %v %v", err, out)
		}
	}
}

func TestPartialBatchDeletesOnlySuccesses(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	client := sqs.NewFromConfig(cfg)
	url := mototest.NewQueue(t, cfg, false, map[string]string{"VisibilityTimeout": "1"})
	sendN(t, client, url, 10)

	// Fail the bodies ending in 3 or 7 on their first delivery only.
	var mu sync.Mutex
	seen := map[string]int{}
	b := startMapping(t, client, Config{QueueURL: url, Pollers: 1, Timeout: time.Second, ReportBatchItemFailures: true}, func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		var resp events.SQSEventResponse
		for _, r := range ev.Records {
			seen[r.Body]++
			if last := r.Body[len(r.Body)-1]; (last == '3' || last == '7') && seen[r.Body] == 1 {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
			}
		}
		return resp, nil
	})
	deleted := map[string]bool{}
	for len(deleted) < 10 {
		inv := b.next(t)
		for _, id := range inv.Deleted {
			deleted[id] = true
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for body, n := range seen {
		want := 1
		if last := body[len(body)-1]; last == '3' || last == '7' {
			want = 2
		}
		if n != want {
			t.Errorf("%s delivered %d times, want %d", body, n, want)
		}
	}
	if len(seen) != 10 {
		t.Errorf("%d distinct messages seen, want 10", len(seen))
	}
}

func TestFailuresRedriveToTheDeadLetterQueue(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	client := sqs.NewFromConfig(cfg)
	dlq := mototest.NewQueue(t, cfg, false, nil)
	redrive := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"3"}`, queueARN(t, client, dlq))
	url := mototest.NewQueue(t, cfg, false, map[string]string{"VisibilityTimeout": "1", "RedrivePolicy": redrive})
	sendN(t, client, url, 2)

	var calls atomic.Int64
	var mu sync.Mutex
	counts := map[string][]string{}
	startMapping(t, client, Config{QueueURL: url, Timeout: time.Second}, func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		calls.Add(1)
		mu.Lock()
		for _, r := range ev.Records {
			counts[r.Body] = append(counts[r.Body], r.Attributes["ApproximateReceiveCount"])
		}
		mu.Unlock()
		return events.SQSEventResponse{}, fmt.Errorf("poison")
	})
	got := mototest.Receive(t, cfg, dlq, 2, 30*time.Second)
	if len(got) != 2 {
		t.Fatalf("%d messages in the DLQ, want 2", len(got))
	}
	mu.Lock()
	defer mu.Unlock()
	for body, c := range counts {
		if !slices.Equal(c, []string{"1", "2", "3"}) {
			t.Errorf("%s delivered with receive counts %v, want [1 2 3] then redriven", body, c)
		}
	}
}

// TestPollersRunConcurrently holds every invocation until two are running at
// once, which only several pollers can achieve.
func TestPollersRunConcurrently(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	client := sqs.NewFromConfig(cfg)
	url := mototest.NewQueue(t, cfg, false, map[string]string{"VisibilityTimeout": "30"})
	sendN(t, client, url, 20)

	var running, peak atomic.Int64
	both := make(chan struct{})
	var once sync.Once
	b := startMapping(t, client, Config{QueueURL: url, Pollers: 4, BatchSize: 2, Timeout: 20 * time.Second},
		func(ctx context.Context, _ events.SQSEvent) (events.SQSEventResponse, error) {
			n := running.Add(1)
			defer running.Add(-1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			if n >= 2 {
				once.Do(func() { close(both) })
			}
			select {
			case <-both:
				return events.SQSEventResponse{}, nil
			case <-ctx.Done():
				return events.SQSEventResponse{}, ctx.Err()
			}
		})
	total := 0
	for total < 20 {
		inv := b.next(t)
		if inv.Err != nil {
			t.Fatalf("invocation failed: %v (pollers never overlapped)", inv.Err)
		}
		total += len(inv.Deleted)
	}
	if peak.Load() < 2 {
		t.Errorf("peak concurrency %d, want at least 2", peak.Load())
	}
}

// TestCheckReadsTheQueue: the eventSourceARN is the queue's real ARN, and a
// function timeout above the queue's real visibility timeout is refused, as
// Lambda's CreateEventSourceMapping refuses it.
func TestCheckReadsTheQueue(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	client := sqs.NewFromConfig(cfg)
	url := mototest.NewQueue(t, cfg, false, map[string]string{"VisibilityTimeout": "2"})
	h := func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
		return events.SQSEventResponse{}, nil
	}

	tooLong, err := New(client, Config{QueueURL: url, Timeout: 3 * time.Second}, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := tooLong.Check(context.Background()); !errors.Is(err, ErrConfig) {
		t.Errorf("Check with a 3 s timeout on a 2 s queue: %v, want ErrConfig", err)
	}
	fits, err := New(client, Config{QueueURL: url, Timeout: 2 * time.Second}, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := fits.Check(context.Background()); err != nil {
		t.Fatalf("Check with a timeout equal to the visibility: %v", err)
	}
	if want := queueARN(t, client, url); fits.arn != want {
		t.Errorf("eventSourceARN %q, want the queue's ARN %q", fits.arn, want)
	}
}
