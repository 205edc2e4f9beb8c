// Command echo is the Lambda function the lambdaruntime tests build and run:
// each event names what the function does, so one binary shows every way a
// function built on aws-lambda-go answers the Runtime API.
package main

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

type event struct {
	Op   string `json:"op"`
	Data string `json:"data"`
}

// seen is what the function saw of its invocation, for the test to compare
// with what the emulator sent.
type seen struct {
	RequestID    string `json:"requestId"`
	FunctionARN  string `json:"functionArn"`
	DeadlineMS   int64  `json:"deadlineMs"`
	TraceID      string `json:"traceId"`
	FunctionName string `json:"functionName"`
	Data         string `json:"data"`
}

func main() { lambda.Start(handle) }

func handle(ctx context.Context, ev event) (any, error) {
	switch ev.Op {
	case "echo":
		lc, _ := lambdacontext.FromContext(ctx)
		deadline, _ := ctx.Deadline()
		return seen{
			RequestID:    lc.AwsRequestID,
			FunctionARN:  lc.InvokedFunctionArn,
			DeadlineMS:   deadline.UnixMilli(),
			TraceID:      os.Getenv("_X_AMZN_TRACE_ID"),
			FunctionName: lambdacontext.FunctionName,
			Data:         ev.Data,
		}, nil
	case "fail":
		return nil, errors.New(ev.Data)
	case "panic":
		panic(ev.Data)
	case "late":
		// Honours its deadline only by answering when it has passed: the
		// answer is late by construction.
		<-ctx.Done()
		return nil, ctx.Err()
	case "stream-error":
		// A returned reader is streamed as the response; its failure goes
		// in the request's trailers.
		return io.MultiReader(strings.NewReader("partial"), failingReader{errors.New(ev.Data)}), nil
	case "big":
		return strings.Repeat("x", 6<<20+1), nil
	}
	return nil, errors.New("unknown op " + ev.Op)
}

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }
