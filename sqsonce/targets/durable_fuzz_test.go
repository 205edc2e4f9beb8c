package targets

// Fuzz targets of what a durable target reads from outside: the TARGET
// form durable:<function>:<qualifier>, and the input of an execution found
// under a key's name (any starter may have put it there).

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/sqs-once/sqs-once/sqsonce"
)

// FuzzDurableSpec: an accepted durable destination is qualified (not
// $LATEST), splits into the function and qualifier ToDurableFunction
// accepts, and spells itself back.
func FuzzDurableSpec(f *testing.F) {
	for _, s := range []string{"orders:live", "orders", "orders:$LATEST", "123456789012:function:orders:7",
		"arn:aws:lambda:eu-west-1:123456789012:function:orders:12", "a:b:c", ":1", "orders:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dest string) {
		spec, err := ParseSpec("durable:" + dest)
		if err != nil {
			if !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), "durable") {
				t.Fatalf("ParseSpec(durable:%q): %v, want ErrBadSpec saying durable", dest, err)
			}
			return
		}
		q := spec.Qualifier()
		if q == "" || q == "$LATEST" || spec.FunctionName() == "" {
			t.Fatalf("durable:%q accepted: function %q qualifier %q", dest, spec.FunctionName(), q)
		}
		function, ok := strings.CutSuffix(dest, ":"+q)
		if !ok {
			t.Fatalf("durable:%q does not end in its qualifier %q", dest, q)
		}
		if _, err := ToDurableFunction(aws.Config{}, function, q); err != nil {
			t.Fatalf("TARGET durable:%q accepted, ToDurableFunction(%q, %q): %v", dest, function, q, err)
		}
	})
}

// takenAPI refuses every Invoke as a name taken and lists one execution of
// that name, whose input is input.
type takenAPI struct{ input *string }

func (takenAPI) Invoke(context.Context, *lambda.InvokeInput, ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	return nil, &lambdatypes.DurableExecutionAlreadyStartedException{Message: aws.String("taken")}
}

func (takenAPI) ListDurableExecutionsByFunction(_ context.Context, in *lambda.ListDurableExecutionsByFunctionInput, _ ...func(*lambda.Options)) (*lambda.ListDurableExecutionsByFunctionOutput, error) {
	return &lambda.ListDurableExecutionsByFunctionOutput{DurableExecutions: []lambdatypes.Execution{
		{DurableExecutionName: in.DurableExecutionName, DurableExecutionArn: aws.String("arn:x")},
	}}, nil
}

func (a takenAPI) GetDurableExecution(context.Context, *lambda.GetDurableExecutionInput, ...func(*lambda.Options)) (*lambda.GetDurableExecutionOutput, error) {
	return &lambda.GetDurableExecutionOutput{DurableExecutionArn: aws.String("arn:x"), InputPayload: a.input, Status: lambdatypes.ExecutionStatusRunning}, nil
}

// FuzzDurableTakenName: whatever input the execution holding a key's name
// has, the target answers exactly one of AlreadyStarted (only when the
// input's sqsOnce.payloadHash is this payload's hash), PayloadMismatch, or
// an error to retry; it never panics.
func FuzzDurableTakenName(f *testing.F) {
	const hash = "3c27e7843d1cdf8c57081fcadfb8b52eea79fb73c5289d35c53900f79b4fa84e"
	m := sqsonce.Delivery{Record: events.SQSMessage{MessageId: "m", Body: "b"}, Key: "k", RecordKey: "k", PayloadHash: hash}
	self, err := durablePayload(m)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(self), true)
	f.Add(`{"sqsOnce":{"payloadHash":"`+hash+`"}}`, true)
	f.Add(`{"sqsOnce":{"payloadHash":"`+strings.ToUpper(hash)+`"}}`, true)
	f.Add(`{"sqsOnce":null}`, true)
	f.Add(`{"SQSONCE":{"PAYLOADHASH":"`+hash+`"}}`, true)
	f.Add(`[1,2]`, true)
	f.Add(``, false)
	f.Fuzz(func(t *testing.T, input string, present bool) {
		api := takenAPI{}
		if present {
			api.input = &input
		}
		tg := &DurableTarget{API: api, Function: "orders", Qualifier: "1"}
		err := tg.Deliver(context.Background(), []sqsonce.Delivery{m})[0]
		started, mismatch := errors.Is(err, sqsonce.ErrAlreadyStarted), errors.Is(err, sqsonce.ErrPayloadMismatch)
		switch {
		case err == nil:
			t.Fatal("a taken name answered as a start")
		case started && mismatch:
			t.Fatalf("both AlreadyStarted and PayloadMismatch: %v", err)
		case started && (!present || !strings.Contains(strings.ToLower(input), hash)):
			t.Fatalf("AlreadyStarted for an input without this payload's hash: %q", input)
		case !present && (started || mismatch):
			t.Fatalf("judged without an input: %v", err)
		}
	})
}
