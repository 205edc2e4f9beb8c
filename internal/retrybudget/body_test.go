package retrybudget

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
)

// sentRequest is what an SQS call hands its HTTP client: the client fails
// the call after reading it, so nothing leaves the process.
type sentRequest struct {
	writerTo      bool
	body          string
	contentLength int64
}

func send(t *testing.T, options ...func(*middleware.Stack) error) sentRequest {
	t.Helper()
	var got *sentRequest
	client := sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://127.0.0.1:9"),
		Credentials:  credentials.NewStaticCredentialsProvider("testing", "testing", ""),
		Retryer:      aws.NopRetryer{},
		APIOptions:   options,
		HTTPClient: doFunc(func(req *http.Request) (*http.Response, error) {
			_, writerTo := req.Body.(io.WriterTo)
			b, err := io.ReadAll(req.Body)
			if err != nil {
				t.Errorf("read the request body: %v", err)
			}
			got = &sentRequest{writerTo: writerTo, body: string(b), contentLength: req.ContentLength}
			return nil, errors.New("this test sends nothing")
		}),
	})
	_, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String("http://127.0.0.1:9/000000000000/q"), MessageBody: aws.String("hello")})
	if err == nil || got == nil {
		t.Fatalf("the call did not reach the HTTP client (error %v)", err)
	}
	return *got
}

type doFunc func(*http.Request) (*http.Response, error)

func (f doFunc) Do(req *http.Request) (*http.Response, error) { return f(req) }

// The body the transport gets has no WriteTo (its closed-body answer,
// io.EOF, is what makes net/http close the connection; see
// body_moto_test.go for the whole failure) and is the same request: the
// same bytes and Content-Length. Adding the option twice, as a client built
// with it from a config that has it does, is harmless.
func TestSafeRequestBodyHidesWriteToOnly(t *testing.T) {
	t.Parallel()
	plain := send(t)
	if !plain.writerTo {
		t.Fatal("without the option the SDK's body has no WriteTo: the SDK changed, and the option (and this test) may need another look")
	}
	for _, n := range []int{1, 2} {
		var opts []func(*middleware.Stack) error
		for range n {
			opts = append(opts, SafeRequestBody)
		}
		safe := send(t, opts...)
		if safe.writerTo {
			t.Errorf("added %d times: the body still offers WriteTo", n)
		}
		if safe.body != plain.body || safe.contentLength != plain.contentLength || !strings.Contains(safe.body, "hello") {
			t.Errorf("added %d times: body %q (Content-Length %d), want %q (%d)", n, safe.body, safe.contentLength, plain.body, plain.contentLength)
		}
	}
}
