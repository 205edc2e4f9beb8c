package targets

// Fuzz targets of the partial batch response a Lambda target reads from
// the consumer function (outside input: the consumer is any code) and of
// the TARGET environment variables.
// Plain `go test` runs the seeds and testdata/fuzz; `make fuzz` searches
// further.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/sqsonce"
)

// answerAPI is a function that answers every invocation with payload, and
// records the events it was sent.
type answerAPI struct {
	payload []byte
	events  [][]byte
}

func (a *answerAPI) Invoke(_ context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	a.events = append(a.events, in.Payload)
	return &lambda.InvokeOutput{StatusCode: 200, Payload: a.payload}, nil
}

// FuzzLambdaBatchResponse answers a batch of records (ids: the records'
// messageIds, comma-separated, repeats and empty ones allowed) with an
// arbitrary response and checks what Deliver makes of it: one result per
// record; a record is reported accepted only when the response is one a
// consumer reads as success for it (empty, null, or one JSON object in
// which no batchItemFailures entry, however encoding/json could match the
// member names, names it); a record is reported failed by item only when
// the response names it; and every event sent is valid JSON within
// Lambda's limit, holding the records in order.
func FuzzLambdaBatchResponse(f *testing.F) {
	for _, seed := range []struct {
		payload string
		ids     string
		fifo    bool
	}{
		{``, "m-1,m-2", false},
		{`null`, "m-1", false},
		{`{}`, "m-1", false},
		{`{"batchItemFailures":[]}`, "m-1,m-2", false},
		{`{"batchItemFailures":null}`, "m-1", false},
		{`{"batchItemFailures":[{"itemIdentifier":"m-2"}]}`, "m-1,m-2,m-3", false},
		{`{"batchItemFailures":[{"itemIdentifier":"m-2"}]}`, "m-1,m-2,m-3", true},
		{`{"batchItemFailures":[{"itemIdentifier":"other"}]}`, "m-1,m-2", false},
		{`{"batchItemFailures":[{"itemIdentifier":""}]}`, "m-1", false},
		{`{"batchItemFailures":[{}]}`, "m-1", false},
		{`{"batchItemFailures":[{"itemIdentifier":5}]}`, "m-1", false},
		{`{"batchItemFailures":"m-1"}`, "m-1", false},
		{`{"BATCHITEMFAILURES":[{"ITEMIDENTIFIER":"m-1"}]}`, "m-1,m-2", false},
		{`{"batchItemFailures":[{"itemIdentifier":"m-1"}]} {}`, "m-1,m-2", false},
		{`[{"itemIdentifier":"m-1"}]`, "m-1", false},
		{`"ok"`, "m-1", false},
		{`{"statusCode":200,"body":"done"}`, "m-1", false},
		{"\n {\"batchItemFailures\": [ {\"itemIdentifier\": \"m-\\u0031\"} ] }\n", "m-1,m-2", false},
		{`{"batchItemFailures":[{"itemIdentifier":"m-1"},{"itemIdentifier":"m-1"}]}`, "m-1,m-2", false},
	} {
		f.Add([]byte(seed.payload), seed.ids, seed.fifo)
	}
	f.Fuzz(func(t *testing.T, payload []byte, ids string, fifo bool) {
		arn := "arn:aws:sqs:us-east-1:123456789012:source"
		if fifo {
			arn += ".fifo"
		}
		split := strings.Split(ids, ",")
		if len(split) > 12 {
			split = split[:12]
		}
		msgs := make([]sqsonce.Delivery, len(split))
		inBatch := map[string]bool{}
		for i, id := range split {
			msgs[i] = sqsonce.Delivery{Key: "k" + strconv.Itoa(i), Fence: int64(i + 1), Record: events.SQSMessage{
				MessageId: id, Body: "body " + id, EventSourceARN: arn,
				Attributes: map[string]string{"MessageGroupId": "g" + strconv.Itoa(i%3)},
			}}
			inBatch[id] = true
		}
		api := &answerAPI{payload: payload}
		tg := &LambdaTarget{API: api, Function: "consumer", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		errs := tg.Deliver(context.Background(), msgs)
		if len(errs) != len(msgs) {
			t.Fatalf("%d results for %d records", len(errs), len(msgs))
		}

		named, wellFormed := refBatchResponse(payload)
		strange := false // the response names a record outside the batch
		for id := range named {
			strange = strange || !inBatch[id]
		}
		for i, err := range errs {
			id := msgs[i].Record.MessageId
			switch {
			case err == nil:
				if !wellFormed || named[id] || strange {
					t.Fatalf("record %d (%q) reported accepted on response %q (well formed: %t, names it: %t, names a stranger: %t)",
						i, id, payload, wellFormed, named[id], strange)
				}
			case errors.Is(err, ErrItemFailed):
				if !wellFormed || !named[id] {
					t.Fatalf("record %d (%q) reported failed by item, but response %q (well formed: %t) does not name it", i, id, payload, wellFormed)
				}
			case errors.Is(err, ErrUnreadableResponse):
			case errors.Is(err, ErrGroupBlocked):
				if !fifo {
					t.Fatalf("record %d blocked by its group on a standard queue", i)
				}
			default:
				t.Fatalf("record %d: unexpected error %v", i, err)
			}
		}

		// The events sent: valid JSON, within the limit, the records in
		// order.
		var sent []string
		for _, ev := range api.events {
			if len(ev) > MaxInvokeBytes || !json.Valid(ev) {
				t.Fatalf("event of %d bytes, valid JSON: %t", len(ev), json.Valid(ev))
			}
			var e events.SQSEvent
			if err := json.Unmarshal(ev, &e); err != nil {
				t.Fatal(err)
			}
			for _, r := range e.Records {
				sent = append(sent, r.MessageId)
			}
		}
		if !fifo && len(sent) != len(msgs) {
			t.Fatalf("%d records sent of %d", len(sent), len(msgs))
		}
		for k, id := range sent {
			if want := msgs[k].Record.MessageId; utf8.ValidString(want) && id != want {
				t.Fatalf("record %d sent as %q, want %q", k, id, want)
			}
		}
	})
}

// refBatchResponse is an independent reading of a response: whether it is
// one a consumer means as a partial batch response (empty, null, or
// exactly one JSON object), and every itemIdentifier string it could mean,
// from every member whose name encoding/json would match to
// batchItemFailures and itemIdentifier (it matches names without regard to
// case, and keeps the last of two) in any entry.
func refBatchResponse(payload []byte) (named map[string]bool, wellFormed bool) {
	named = map[string]bool{}
	trimmed := bytes.TrimSpace(payload)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return named, true
	}
	if !json.Valid(trimmed) || trimmed[0] != '{' {
		return named, false
	}
	members := func(raw json.RawMessage, each func(name string, v json.RawMessage)) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return
		}
		for dec.More() {
			name, _ := dec.Token()
			var v json.RawMessage
			if dec.Decode(&v) != nil {
				return
			}
			each(name.(string), v)
		}
	}
	members(trimmed, func(name string, v json.RawMessage) {
		if !strings.EqualFold(name, "batchItemFailures") {
			return
		}
		var entries []json.RawMessage
		if json.Unmarshal(v, &entries) != nil {
			return
		}
		for _, e := range entries {
			members(e, func(name string, v json.RawMessage) {
				var id string
				if strings.EqualFold(name, "itemIdentifier") && json.Unmarshal(v, &id) == nil {
					named[id] = true
				}
			})
		}
	})
	return named, true
}

// FuzzTargetFromEnv reads arbitrary TARGET, TARGET_EVENT_SOURCE,
// TARGET_DETAIL_TYPE and AWS_LAMBDA_FUNCTION_NAME values: never a panic; a
// refusal names only those variables; an accepted TARGET spells itself
// back, parses to the same spec again, and never names the processor's own
// function.
func FuzzTargetFromEnv(f *testing.F) {
	f.Add("lambda:orders-consumer", "", "", "orders-processor")
	f.Add("lambda:orders-processor:live", "", "", "orders-processor")
	f.Add("lambda:arn:aws:lambda:eu-west-1:123456789012:function:orders-processor:7", "", "", "orders-processor")
	f.Add("lambda:123456789012:function:c:$LATEST", "", "", "")
	f.Add("sqs:https://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo", "", "", "")
	f.Add("sqs:https://sqs.us-east-1.amazonaws.com/123456789012/orders?x=1", "", "", "")
	f.Add("sns:arn:aws:sns:us-east-1:123456789012:orders", "", "", "")
	f.Add("events:orders-bus", "orders", "Order", "")
	f.Add("events:arn:aws:events:us-east-1:123456789012:event-bus/orders", "", "", "")
	f.Add("kinesis:stream", "", "", "")
	f.Add("lambda:", "", "", "")
	f.Add("  ", "", "", "")
	f.Fuzz(func(t *testing.T, spec, source, detailType, self string) {
		env := map[string]string{"TARGET": spec, "TARGET_EVENT_SOURCE": source, "TARGET_DETAIL_TYPE": detailType, "AWS_LAMBDA_FUNCTION_NAME": self}
		tg, err := FromEnv(envconfig.Map(env), aws.Config{Region: "us-east-1"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			for _, e := range unjoin(err) {
				var ve *envconfig.VarError
				if !errors.As(e, &ve) || ve.Name != "TARGET" || !strings.HasPrefix(e.Error(), "environment variable TARGET: ") {
					t.Fatalf("error %q does not name TARGET", e)
				}
			}
			if tg != nil {
				t.Fatal("a target and an error")
			}
			return
		}
		if strings.TrimSpace(spec) == "" {
			if tg != nil {
				t.Fatalf("a target without TARGET: %#v", tg)
			}
			return
		}
		parsed, err := ParseSpec(strings.TrimSpace(spec))
		if err != nil || tg == nil {
			t.Fatalf("FromEnv accepted TARGET=%q, ParseSpec says %v", spec, err)
		}
		if parsed.String() != strings.TrimSpace(spec) {
			t.Fatalf("ParseSpec(%q) spells itself %q", spec, parsed)
		}
		if again, err := ParseSpec(parsed.String()); err != nil || again != parsed {
			t.Fatalf("ParseSpec(%q) = %v, %v; first read as %v", parsed, again, err, parsed)
		}
		if parsed.Kind == Lambda || parsed.Kind == Durable {
			if parsed.FunctionName() == "" || parsed.FunctionName() == strings.TrimSpace(self) {
				t.Fatalf("%s target %q (function %q) accepted with AWS_LAMBDA_FUNCTION_NAME=%q", parsed.Kind, spec, parsed.FunctionName(), self)
			}
		}
	})
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var all []error
		for _, e := range j.Unwrap() {
			all = append(all, unjoin(e)...)
		}
		return all
	}
	return []error{err}
}
