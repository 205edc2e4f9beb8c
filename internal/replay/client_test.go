package replay

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/sqs-once/sqs-once/internal/envconfig"
)

// The replayer's own SQS client is built with retrybudget.SafeRequestBody:
// its request bodies reach net/http without WriteTo, which is what keeps a
// replay SQS accepted from being sent again when the function's CPU lags
// behind the answer (retrybudget's body_moto_test.go shows the duplicate).
func TestNewHandlerNeverRepeatsAnAnsweredSend(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(envconfig.Map(map[string]string{"MAIN_QUEUE_URL": mainURL, "OPERATOR_QUEUE_URL": opURL}))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	sends, writerTos := 0, 0
	awsCfg := aws.Config{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://127.0.0.1:9"),
		Credentials:  credentials.NewStaticCredentialsProvider("testing", "testing", ""),
		Retryer:      func() aws.Retryer { return aws.NopRetryer{} },
		HTTPClient: doFunc(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			sends++
			if _, ok := req.Body.(io.WriterTo); ok {
				writerTos++
			}
			return nil, errors.New("this test sends nothing")
		}),
	}
	h := NewHandlerWith(cfg, awsCfg, Deps{Logger: slog.New(slog.DiscardHandler)})
	if _, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("r-1", "body", nil)}}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if sends == 0 {
		t.Fatal("no send reached the HTTP client: the test proved nothing")
	}
	if writerTos != 0 {
		t.Errorf("%d of %d sends handed net/http a body with WriteTo: the client lacks retrybudget.SafeRequestBody", writerTos, sends)
	}
}

type doFunc func(*http.Request) (*http.Response, error)

func (f doFunc) Do(req *http.Request) (*http.Response, error) { return f(req) }
