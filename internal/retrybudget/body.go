package retrybudget

import (
	"context"
	"fmt"
	"io"

	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// SafeRequestBody is an SDK API option (for aws.Config.APIOptions or a
// client's Options.APIOptions) that keeps a call the service has answered
// from being made a second time by the SDK's retryer. Adding it twice is
// harmless.
//
// The SDK closes a request's body as soon as the HTTP client hands it the
// response, but net/http's transport finishes writing a request on a
// goroutine of its own: after the body's bytes are on the wire, that
// goroutine reads the body once more to check that nothing is left. The
// SDK's body answers that read through WriteTo, which returns io.EOF once
// the body is closed; net/http takes it for a failed write and closes the
// connection under the response the SDK is still reading. The read fails
// with "use of closed network connection", an error the SDK retries: a
// SendMessageBatch that SQS applied is sent again (a duplicate), a
// ReceiveMessage's messages stay in flight for their visibility timeout
// while the retry finds none, a conditional write fails on the item it
// wrote itself. Only the writer goroutine has to lag behind the response,
// which a busy CPU makes common: a loaded test machine, a Lambda function
// with a fraction of a vCPU.
//
// The option hides WriteTo from the transport, so that its last read of a
// closed body goes through Read, whose io.EOF ends the request cleanly.
func SafeRequestBody(stack *middleware.Stack) error {
	if _, ok := stack.Finalize.Get(safeBodyID); ok {
		return nil
	}
	// Last in the finalize step: after the retry middleware, which rewinds
	// the seekable stream for each attempt and so must keep it, and after
	// the payload hash and signing, which read it.
	return stack.Finalize.Add(safeBody{}, middleware.After)
}

const safeBodyID = "sqs-once.SafeRequestBody"

type safeBody struct{}

func (safeBody) ID() string { return safeBodyID }

func (safeBody) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (
	middleware.FinalizeOutput, middleware.Metadata, error,
) {
	req, ok := in.Request.(*smithyhttp.Request)
	if !ok {
		return next.HandleFinalize(ctx, in)
	}
	if stream := req.GetStream(); stream != nil {
		if _, writerTo := stream.(io.WriterTo); writerTo {
			// SetStream keeps the Content-Length the request has: a
			// reader without Len or Seek gives it none of its own.
			r, err := req.SetStream(readOnly{stream})
			if err != nil {
				return middleware.FinalizeOutput{}, middleware.Metadata{}, fmt.Errorf("retrybudget: wrap the request body: %w", err)
			}
			in.Request = r
		}
	}
	return next.HandleFinalize(ctx, in)
}

// readOnly is a reader with nothing but Read, so that the SDK's body
// wrapper offers the transport no WriteTo.
type readOnly struct{ r io.Reader }

func (o readOnly) Read(p []byte) (int, error) { return o.r.Read(p) }
