package targets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/sqs-once/sqs-once/internal/retrybudget"
	"github.com/sqs-once/sqs-once/sqsonce"
)

// LambdaAPI is the one Lambda call a lambda target makes.
type LambdaAPI interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

var _ LambdaAPI = (*lambda.Client)(nil)

// MaxInvokeBytes is Lambda's limit on a synchronous invocation's payload:
// it must be smaller than 6 MiB ("Request must be smaller than 6291456
// bytes for the InvokeFunction operation").
const MaxInvokeBytes = 6<<20 - 1

// quoteBytes is how much of an unreadable response a log line quotes.
const quoteBytes = 256

// The ways an invocation fails its records.
var (
	// ErrFunctionError: the function returned an error (or timed out, or
	// crashed); every record of the invocation failed.
	ErrFunctionError = errors.New("targets: the target function returned an error")
	// ErrUnreadableResponse: the function's response is neither empty, null,
	// nor a partial batch response naming records of the invocation; every
	// record of the invocation failed, as Lambda's own mapping treats it.
	ErrUnreadableResponse = errors.New("targets: the target function's response is not a partial batch response")
	// ErrItemFailed: the function named the record in batchItemFailures.
	ErrItemFailed = errors.New("targets: the target function reported the record failed")
	// ErrGroupBlocked: on a FIFO queue, an earlier record of the message
	// group failed in an earlier invocation, so this one was not sent.
	ErrGroupBlocked = errors.New("targets: not sent: an earlier record of its message group failed")
)

// LambdaTarget invokes a function synchronously with the messages as an SQS
// event in Lambda's shape, one invocation per batch (more when the event
// would exceed MaxInvokeBytes), and reads its partial batch response.
type LambdaTarget struct {
	API LambdaAPI
	// Function is a name or ARN, with an optional :alias or :version.
	Function string
	// Logger receives one line per failed invocation; nil: slog.Default().
	Logger *slog.Logger
}

// Deliver invokes the function. On a FIFO source the invocations are made
// one after another and a group that failed is not continued; otherwise
// they are made at once.
func (t *LambdaTarget) Deliver(ctx context.Context, msgs []sqsonce.Delivery) []error {
	errs := make([]error, len(msgs))
	encoded := make([][]byte, len(msgs))
	for i, m := range msgs {
		b, err := encodeRecord(m.Record)
		switch {
		case err != nil:
			errs[i] = refused(fmt.Errorf("targets: encode the record: %w", err))
		case eventSize(1, len(b)) > MaxInvokeBytes:
			errs[i] = refused(fmt.Errorf("targets: the record alone makes an event of %d bytes, over Lambda's %d", eventSize(1, len(b)), MaxInvokeBytes))
		}
		encoded[i] = b
	}
	chunks := chunk(encoded, errs)
	fifo := len(msgs) > 0 && isFIFOSource(msgs[0].Record.EventSourceARN)
	if !fifo {
		var wg sync.WaitGroup
		for _, c := range chunks {
			wg.Go(func() { t.invoke(ctx, msgs, encoded, c, errs) })
		}
		wg.Wait()
		return errs
	}
	failedGroups := map[string]bool{}
	for _, c := range chunks {
		var send []int
		for _, i := range c {
			if failedGroups[groupOf(msgs[i])] {
				errs[i] = ErrGroupBlocked
				continue
			}
			send = append(send, i)
		}
		t.invoke(ctx, msgs, encoded, send, errs)
		for _, i := range c {
			if errs[i] != nil {
				failedGroups[groupOf(msgs[i])] = true
			}
		}
	}
	return errs
}

// chunk cuts the sendable records (errs[i] nil) into events under
// MaxInvokeBytes, keeping their order.
func chunk(encoded [][]byte, errs []error) [][]int {
	var chunks [][]int
	var cur []int
	size := 0
	for i, b := range encoded {
		if errs[i] != nil {
			continue
		}
		if len(cur) > 0 && eventSize(len(cur)+1, size+len(b)) > MaxInvokeBytes {
			chunks = append(chunks, cur)
			cur, size = nil, 0
		}
		cur = append(cur, i)
		size += len(b)
	}
	if len(cur) > 0 {
		chunks = append(chunks, cur)
	}
	return chunks
}

// invoke makes one invocation of the records idx and sets their errors.
func (t *LambdaTarget) invoke(ctx context.Context, msgs []sqsonce.Delivery, encoded [][]byte, idx []int, errs []error) {
	if len(idx) == 0 {
		return
	}
	records := make([][]byte, len(idx))
	for n, i := range idx {
		records[n] = encoded[i]
	}
	out, err := t.API.Invoke(ctx, &lambda.InvokeInput{
		FunctionName:   aws.String(t.Function),
		InvocationType: lambdatypes.InvocationTypeRequestResponse,
		Payload:        buildEvent(records),
	}, func(o *lambda.Options) { o.Retryer = retrybudget.Within(ctx, o.Retryer) })
	failAll := func(err error) {
		for _, i := range idx {
			errs[i] = err
		}
	}
	if err != nil {
		failAll(callError(fmt.Errorf("targets: Invoke %s: %w", t.Function, err), true))
		return
	}
	if out.FunctionError != nil {
		t.log().WarnContext(ctx, "target function returned an error; every record of the invocation failed",
			"function", t.Function, "records", len(idx), "functionError", aws.ToString(out.FunctionError), "response", quote(out.Payload))
		failAll(fmt.Errorf("%w (%s): %s", ErrFunctionError, aws.ToString(out.FunctionError), quote(out.Payload)))
		return
	}
	ids := make(map[string][]int, len(idx))
	for _, i := range idx {
		ids[msgs[i].Record.MessageId] = append(ids[msgs[i].Record.MessageId], i)
	}
	failed, err := readBatchResponse(out.Payload, ids)
	if err != nil {
		t.log().ErrorContext(ctx, "target function's response is not a partial batch response; every record of the invocation failed",
			"function", t.Function, "records", len(idx), "error", err, "response", quote(out.Payload))
		failAll(fmt.Errorf("%w: %v", ErrUnreadableResponse, err))
		return
	}
	for _, i := range failed {
		errs[i] = ErrItemFailed
	}
}

// readBatchResponse reads a function's response as Lambda reads a partial
// batch response: empty, null, an object without batchItemFailures, or one
// whose batchItemFailures is null or empty, is a success of every record;
// otherwise each itemIdentifier must be the messageId of a record of the
// invocation. It returns the indexes of the records named: every record of
// a messageId named, should the invocation hold two. A response that could
// be read two ways (data after the object; two members encoding/json would
// both take for batchItemFailures or for one entry's itemIdentifier, as it
// ignores case and keeps the last) is an error: read one way, it could
// report a record done that the function failed.
func readBatchResponse(payload []byte, ids map[string][]int) ([]int, error) {
	trimmed := bytes.TrimSpace(payload)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return nil, nil
	}
	if trimmed[0] != '{' {
		return nil, errors.New("not a JSON object")
	}
	var resp struct {
		BatchItemFailures []json.RawMessage `json:"batchItemFailures"`
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(&resp); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	if err := uniqueMember(trimmed, "batchItemFailures"); err != nil {
		return nil, err
	}
	var failed []int
	for _, raw := range resp.BatchItemFailures {
		var f struct {
			ItemIdentifier *string `json:"itemIdentifier"`
		}
		if err := uniqueMember(raw, "itemIdentifier"); err != nil {
			return nil, fmt.Errorf("a batchItemFailures entry: %w", err)
		}
		if err := json.Unmarshal(raw, &f); err != nil {
			return nil, err
		}
		if f.ItemIdentifier == nil || *f.ItemIdentifier == "" {
			return nil, errors.New("a batchItemFailures entry without itemIdentifier")
		}
		is, ok := ids[*f.ItemIdentifier]
		if !ok {
			return nil, fmt.Errorf("itemIdentifier %q is not a record of the invocation", *f.ItemIdentifier)
		}
		failed = append(failed, is...)
	}
	return failed, nil
}

// uniqueMember refuses a JSON object (other values pass) with two members
// that encoding/json would both decode into a field named name.
func uniqueMember(v json.RawMessage, name string) error {
	dec := json.NewDecoder(bytes.NewReader(v))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return err
	}
	seen := false
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
		if strings.EqualFold(t.(string), name) {
			if seen {
				return fmt.Errorf("two members %s", name)
			}
			seen = true
		}
	}
	return nil
}

// quote is at most the first quoteBytes of a response, for a log line.
func quote(b []byte) string {
	if len(b) <= quoteBytes {
		return string(b)
	}
	return string(b[:quoteBytes]) + fmt.Sprintf("… (%d bytes)", len(b))
}

func (t *LambdaTarget) log() *slog.Logger {
	if t.Logger != nil {
		return t.Logger
	}
	return slog.Default()
}

func isFIFOSource(arn string) bool { return strings.HasSuffix(arn, ".fifo") }

// groupOf is a FIFO record's message group.
func groupOf(m sqsonce.Delivery) string { return m.Record.Attributes["MessageGroupId"] }
