package retrybudgettest

import (
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// BodyCheck is an HTTP client for a test that a client built from an
// aws.Config carries retrybudget.SafeRequestBody: it answers every request with an
// error, and counts the requests and those whose body offered net/http
// WriteTo (none may, with the option).
type BodyCheck struct {
	mu               sync.Mutex
	Sends, WriterTos int
}

// Do implements the SDK's HTTP client.
func (b *BodyCheck) Do(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.Sends++
	if _, ok := req.Body.(io.WriterTo); ok {
		b.WriterTos++
	}
	return nil, errors.New("retrybudgettest: BodyCheck sends nothing")
}

// Counts returns the requests seen and those with WriteTo.
func (b *BodyCheck) Counts() (sends, writerTos int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Sends, b.WriterTos
}

// Config is an SDK configuration whose clients send through b, without
// retries, with dummy credentials and an endpoint nothing listens on.
func (b *BodyCheck) Config() aws.Config {
	return aws.Config{
		Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:9"),
		Credentials: credentials.NewStaticCredentialsProvider("testing", "testing", ""),
		Retryer:     func() aws.Retryer { return aws.NopRetryer{} },
		HTTPClient:  b,
	}
}
