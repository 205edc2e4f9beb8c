//go:build integration

package targets_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// recorder keeps the body of every request it carries: what a target
// really sent, as the service received it.
type recorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	seen [][]byte
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		r.mu.Lock()
		r.seen = append(r.seen, b)
		r.mu.Unlock()
	}
	return r.base.RoundTrip(req)
}

func (r *recorder) bodies() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.seen...)
}

type lambdaBundle struct {
	cfg      aws.Config
	function string
	rec      *recorder
	target   *targets.LambdaTarget
	proxy    *faultproxy.Proxy
}

// setupLambda is a function on moto_server's Docker-free Lambda, and a
// target invoking it through a fault proxy and a recorder of what it sent.
func setupLambda(t *testing.T) *lambdaBundle {
	t.Helper()
	cfg := mototest.Config(t)
	b := &lambdaBundle{cfg: cfg, function: mototest.NewFunction(t, cfg)}
	p, err := faultproxy.Start(mototest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	b.proxy = p
	b.rec = &recorder{base: http.DefaultTransport}
	via := cfg.Copy()
	via.BaseEndpoint = aws.String(p.URL)
	via.HTTPClient = &http.Client{Transport: b.rec}
	b.target = must(targets.ToFunction(via, b.function))(t)
	return b
}

func sampleEvent(t *testing.T) ([]byte, events.SQSEvent) {
	t.Helper()
	raw, err := os.ReadFile("../../internal/local/localesm/testdata/lambda-sqs-event.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	return raw, ev
}

func messages(records []events.SQSMessage) []sqsonce.Delivery {
	msgs := make([]sqsonce.Delivery, len(records))
	for i, r := range records {
		msgs[i] = sqsonce.Delivery{Record: r, Key: r.MessageId, Fence: int64(1700000000000 + i)}
	}
	return msgs
}

func jsonEqual(t *testing.T, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("want is not JSON: %v", err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("JSON differs:\ngot  %s\nwant %s", got, want)
	}
}

// The function receives exactly the event Lambda's own mapping would give
// it: the documented sample, sent through the target, arrives unchanged
// (null md5OfMessageAttributes, empty list values and all).
func TestLambdaInvokeCarriesLambdasSQSEvent(t *testing.T) {
	b := setupLambda(t)
	raw, ev := sampleEvent(t)
	errs := b.target.Deliver(context.Background(), messages(ev.Records))
	for i, err := range errs {
		if err != nil {
			t.Errorf("record %d: %v", i, err)
		}
	}
	sent := b.rec.bodies()
	if len(sent) != 1 {
		t.Fatalf("%d invocations, want 1 for the batch", len(sent))
	}
	jsonEqual(t, sent[0], raw)
}

func TestLambdaResponses(t *testing.T) {
	_, ev := sampleEvent(t)
	ids := []string{ev.Records[0].MessageId, ev.Records[1].MessageId}
	tests := []struct {
		name     string
		response string
		want     []error // per record; nil: accepted
	}{
		{"echoed event is no partial batch response", "", []error{nil, nil}},
		{"empty object", `{}`, []error{nil, nil}},
		{"null", `null`, []error{nil, nil}},
		{"null list", `{"batchItemFailures":null}`, []error{nil, nil}},
		{"empty list", `{"batchItemFailures":[]}`, []error{nil, nil}},
		{"other members", `{"statusCode":200,"batchItemFailures":[]}`, []error{nil, nil}},
		{"second named", fmt.Sprintf(`{"batchItemFailures":[{"itemIdentifier":%q}]}`, ids[1]), []error{nil, targets.ErrItemFailed}},
		{"both named", fmt.Sprintf(`{"batchItemFailures":[{"itemIdentifier":%q},{"itemIdentifier":%q}]}`, ids[0], ids[1]), []error{targets.ErrItemFailed, targets.ErrItemFailed}},
		{"not JSON", `OK, done`, []error{targets.ErrUnreadableResponse, targets.ErrUnreadableResponse}},
		{"a JSON string", `"done"`, []error{targets.ErrUnreadableResponse, targets.ErrUnreadableResponse}},
		{"unknown id", `{"batchItemFailures":[{"itemIdentifier":"no-such-record"}]}`, []error{targets.ErrUnreadableResponse, targets.ErrUnreadableResponse}},
		{"empty id", `{"batchItemFailures":[{"itemIdentifier":""}]}`, []error{targets.ErrUnreadableResponse, targets.ErrUnreadableResponse}},
		{"missing id", `{"batchItemFailures":[{}]}`, []error{targets.ErrUnreadableResponse, targets.ErrUnreadableResponse}},
		{"list of the wrong type", `{"batchItemFailures":"all"}`, []error{targets.ErrUnreadableResponse, targets.ErrUnreadableResponse}},
		{"trailing data", `{} {}`, []error{targets.ErrUnreadableResponse, targets.ErrUnreadableResponse}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := setupLambda(t)
			if tt.response != "" {
				mototest.QueueInvokeResults(t, b.cfg, tt.response)
			}
			got := b.target.Deliver(context.Background(), messages(ev.Records))
			for i := range tt.want {
				if !errors.Is(got[i], tt.want[i]) || (tt.want[i] == nil) != (got[i] == nil) {
					t.Errorf("record %d: %v, want %v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestLambdaFunctionErrorFailsTheInvocation(t *testing.T) {
	b := setupLambda(t)
	_, ev := sampleEvent(t)
	h := http.Header{}
	h.Set("X-Amz-Function-Error", "Unhandled")
	h.Set("Content-Type", "application/json")
	b.proxy.Script("Invoke", faultproxy.AnswerAfter(http.StatusOK, h, []byte(`{"errorMessage":"card declined","errorType":"PaymentError"}`)))
	for i, err := range b.target.Deliver(context.Background(), messages(ev.Records)) {
		if !errors.Is(err, targets.ErrFunctionError) || errors.Is(err, sqsonce.ErrTargetRefused) || errors.Is(err, sqsonce.ErrOutcomeUnknown) {
			t.Errorf("record %d: %v, want a retryable ErrFunctionError", i, err)
		}
		if err != nil && !strings.Contains(err.Error(), "card declined") {
			t.Errorf("record %d: %v does not quote the function's error", i, err)
		}
	}
}

// Throttles are retried by the SDK (the function did not run); a 500 of the
// Invoke API is not retried, since the function may have run, and is an
// unknown outcome; an unknown function is refused for good.
func TestLambdaInvokeErrors(t *testing.T) {
	_, ev := sampleEvent(t)
	t.Run("throttle retried", func(t *testing.T) {
		b := setupLambda(t)
		b.proxy.Script("Invoke", faultproxy.Throttle, faultproxy.Throttle)
		for i, err := range b.target.Deliver(context.Background(), messages(ev.Records)) {
			if err != nil {
				t.Errorf("record %d: %v", i, err)
			}
		}
		if got := b.proxy.Stats().Forwarded["Invoke"]; got != 1 {
			t.Errorf("%d invocations reached Lambda, want 1 after two throttles", got)
		}
	})
	for _, f := range []faultproxy.Fault{faultproxy.FailAfter, faultproxy.ResetAfter} {
		t.Run(f.String()+" is an unknown outcome, never retried", func(t *testing.T) {
			b := setupLambda(t)
			b.proxy.Script("Invoke", f)
			for i, err := range b.target.Deliver(context.Background(), messages(ev.Records)) {
				if !errors.Is(err, sqsonce.ErrOutcomeUnknown) {
					t.Errorf("record %d: %v, want ErrOutcomeUnknown", i, err)
				}
			}
			if got := b.proxy.Stats().Forwarded["Invoke"]; got != 1 {
				t.Errorf("%d invocations reached Lambda, want exactly 1: a retry could run the consumer twice", got)
			}
		})
	}
	t.Run("FailBefore is an unknown outcome too", func(t *testing.T) {
		// A 500 from the Invoke API cannot say whether the function ran.
		b := setupLambda(t)
		b.proxy.Script("Invoke", faultproxy.FailBefore)
		for i, err := range b.target.Deliver(context.Background(), messages(ev.Records)) {
			if !errors.Is(err, sqsonce.ErrOutcomeUnknown) {
				t.Errorf("record %d: %v, want ErrOutcomeUnknown", i, err)
			}
		}
	})
	t.Run("no such function is refused", func(t *testing.T) {
		// moto's Docker-free backend invokes any name: the answer of a
		// real Lambda is injected.
		b := setupLambda(t)
		h := http.Header{}
		h.Set("X-Amzn-ErrorType", "ResourceNotFoundException")
		h.Set("Content-Type", "application/json")
		b.proxy.Script("Invoke", faultproxy.AnswerBefore(http.StatusNotFound, h, []byte(`{"Type":"User","message":"Function not found: no-such-function"}`)))
		for i, err := range b.target.Deliver(context.Background(), messages(ev.Records)) {
			if !errors.Is(err, sqsonce.ErrTargetRefused) {
				t.Errorf("record %d: %v, want ErrRefused", i, err)
			}
		}
	})
}

func bigRecords(n, size int, fifo bool) []events.SQSMessage {
	recs := make([]events.SQSMessage, n)
	arn := "arn:aws:sqs:us-east-1:123456789012:orders"
	if fifo {
		arn += ".fifo"
	}
	for i := range recs {
		recs[i] = events.SQSMessage{
			MessageId:      fmt.Sprintf("m%d", i),
			Body:           strings.Repeat("x", size),
			EventSource:    "aws:sqs",
			EventSourceARN: arn,
			Attributes:     map[string]string{"MessageGroupId": fmt.Sprintf("g%d", i%2)},
		}
	}
	return recs
}

// Ten records of 1 MiB do not fit one 6 MiB invocation: they are split,
// every invocation under the limit, every record in exactly one.
func TestLambdaSplitsUnderTheRequestLimit(t *testing.T) {
	b := setupLambda(t)
	recs := bigRecords(10, 1<<20-200, false)
	for i, err := range b.target.Deliver(context.Background(), messages(recs)) {
		if err != nil {
			t.Errorf("record %d: %v", i, err)
		}
	}
	seen := map[string]int{}
	sent := b.rec.bodies()
	if len(sent) != 2 {
		t.Errorf("%d invocations, want 2", len(sent))
	}
	for _, body := range sent {
		if len(body) > targets.MaxInvokeBytes {
			t.Errorf("an invocation of %d bytes, over %d", len(body), targets.MaxInvokeBytes)
		}
		var ev events.SQSEvent
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Fatal(err)
		}
		for _, r := range ev.Records {
			seen[r.MessageId]++
		}
	}
	for _, r := range recs {
		if seen[r.MessageId] != 1 {
			t.Errorf("%s in %d invocations, want 1", r.MessageId, seen[r.MessageId])
		}
	}
}

// On a FIFO source the invocations run in order, and a group with a failed
// record in one invocation sends none of its later records.
func TestLambdaFIFOGroupStopsAfterAFailure(t *testing.T) {
	b := setupLambda(t)
	recs := bigRecords(10, 1<<20-200, true) // groups g0 (even) and g1 (odd), two invocations
	mototest.QueueInvokeResults(t, b.cfg, `{"batchItemFailures":[{"itemIdentifier":"m2"}]}`)
	errs := b.target.Deliver(context.Background(), messages(recs))
	first := map[string]bool{}
	var ev events.SQSEvent
	if err := json.Unmarshal(b.rec.bodies()[0], &ev); err != nil {
		t.Fatal(err)
	}
	for _, r := range ev.Records {
		first[r.MessageId] = true
	}
	for i, r := range recs {
		var want error
		switch {
		case r.MessageId == "m2":
			want = targets.ErrItemFailed
		case !first[r.MessageId] && i%2 == 0:
			want = targets.ErrGroupBlocked
		}
		if !errors.Is(errs[i], want) || (want == nil) != (errs[i] == nil) {
			t.Errorf("%s: %v, want %v", r.MessageId, errs[i], want)
		}
	}
	for _, body := range b.rec.bodies()[1:] {
		var later events.SQSEvent
		if err := json.Unmarshal(body, &later); err != nil {
			t.Fatal(err)
		}
		for _, r := range later.Records {
			if r.Attributes["MessageGroupId"] == "g0" {
				t.Errorf("%s of the failed group g0 was sent after m2 failed", r.MessageId)
			}
		}
	}
}

func TestLambdaRefusesATooLargeRecordAlone(t *testing.T) {
	b := setupLambda(t)
	recs := bigRecords(2, 10, false)
	recs[0].Body = strings.Repeat("\x01", 2<<20) // escaped as \u0001: 12 MiB of JSON
	errs := b.target.Deliver(context.Background(), messages(recs))
	if !errors.Is(errs[0], sqsonce.ErrTargetRefused) || errs[1] != nil {
		t.Errorf("errors %v, want the large record refused and the other accepted", errs)
	}
}
