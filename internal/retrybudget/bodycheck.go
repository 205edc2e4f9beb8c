package retrybudget

import (
	"errors"
	"io"
	"net/http"
	"sync"
)

// BodyCheck is an HTTP client for a test that a client built from an
// aws.Config carries SafeRequestBody: it answers every request with an
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
	return nil, errors.New("retrybudget.BodyCheck sends nothing")
}

// Counts returns the requests seen and those with WriteTo.
func (b *BodyCheck) Counts() (sends, writerTos int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Sends, b.WriterTos
}
