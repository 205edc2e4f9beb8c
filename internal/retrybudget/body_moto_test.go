//go:build integration

package retrybudget_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/retrybudget"
)

func TestMain(m *testing.M) { mototest.Main(m) }

// A send SQS (moto) has applied is sent once, however late net/http's
// writer goroutine finishes the request. The test makes that goroutine
// lag, as a busy CPU does: it holds the write that ends the first
// request's body until the SDK is reading the response body, and lets the
// response body through only once the writer is done, so the outcome does
// not depend on the scheduler. Without SafeRequestBody the SDK's closed
// request body makes the transport close the connection under that read,
// and the SDK sends the message again: that half shows the harness can
// fail, and says so if the SDK ever fixes it.
func TestAnAnsweredSendIsNotSentAgain(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	for _, tt := range []struct {
		name    string
		options []func(*middleware.Stack) error
		want    int
	}{
		{"without SafeRequestBody the SDK sends it twice", nil, 2},
		{"with SafeRequestBody", []func(*middleware.Stack) error{retrybudget.SafeRequestBody}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			queueURL := mototest.NewQueue(t, cfg, false, nil)
			lag := &laggingWriter{release: make(chan struct{}), wrote: make(chan struct{}), closed: make(chan struct{})}
			client := sqs.New(sqs.Options{
				Region:       cfg.Region,
				BaseEndpoint: aws.String(mototest.URL(t)),
				Credentials:  credentials.NewStaticCredentialsProvider("testing", "testing", ""),
				HTTPClient:   lag.client(),
				APIOptions:   tt.options,
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String("once")}); err != nil {
				t.Fatalf("send: %v", err)
			}
			if !lag.held.Load() {
				t.Fatal("the first request's body write was never held: the test proved nothing")
			}
			// The retry, if any, was made before SendMessage returned.
			attrs, err := sqs.NewFromConfig(cfg).GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL),
				AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
			if err != nil {
				t.Fatal(err)
			}
			if got := attrs.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)]; got != strconv.Itoa(tt.want) {
				t.Errorf("the queue holds %s messages after one send, want %d", got, tt.want)
			}
		})
	}
}

// laggingWriter is an HTTP client whose first connection holds the write
// that ends the request body (JSON, so its last byte is '}') until the
// SDK reads the response body, and passes the response's headers at once
// but its body only after the request's write has finished (its trace's
// WroteRequest without error) or the connection was closed.
type laggingWriter struct {
	dialed  atomic.Bool
	held    atomic.Bool
	release chan struct{} // the held write may return
	wrote   chan struct{} // the first request was written without error
	closed  chan struct{} // the first connection was closed
	once    [3]sync.Once
	// answered is set once the transport has handed the SDK the first
	// response: the next read of the connection is the SDK reading its body.
	answered atomic.Bool
}

func (l *laggingWriter) client() aws.HTTPClient {
	inner := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		dial := (&net.Dialer{Timeout: 5 * time.Second}).DialContext
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil || l.dialed.Swap(true) {
				return c, err
			}
			return &laggingConn{Conn: c, l: l}, nil
		}
	})
	return doFunc(func(req *http.Request) (*http.Response, error) {
		first := !l.answered.Load()
		if first {
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
				WroteRequest: func(i httptrace.WroteRequestInfo) {
					if i.Err == nil {
						l.once[0].Do(func() { close(l.wrote) })
					}
				},
			}))
		}
		resp, err := inner.Do(req)
		if first {
			l.answered.Store(true)
		}
		return resp, err
	})
}

type doFunc func(*http.Request) (*http.Response, error)

func (f doFunc) Do(req *http.Request) (*http.Response, error) { return f(req) }

type laggingConn struct {
	net.Conn
	l        *laggingWriter
	headers  bool   // the response's headers have been passed on
	pending  []byte // what came with them and waits for the body's turn
	bodyTurn bool
}

func (c *laggingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err == nil && bytes.HasSuffix(p, []byte("}")) && !c.l.held.Swap(true) {
		<-c.l.release
	}
	return n, err
}

func (c *laggingConn) Read(p []byte) (int, error) {
	if !c.headers {
		buf := make([]byte, len(p))
		n, err := c.Conn.Read(buf)
		data := append(c.pending, buf[:n]...)
		if i := bytes.Index(data, []byte("\r\n\r\n")); i >= 0 {
			c.headers = true
			c.pending = append([]byte(nil), data[i+4:]...)
			data = data[:i+4]
		} else {
			c.pending = nil
		}
		return copy(p, data), err
	}
	if !c.bodyTurn && c.l.answered.Load() {
		c.bodyTurn = true
		c.l.once[1].Do(func() { close(c.l.release) })
		select {
		case <-c.l.wrote:
		case <-c.l.closed:
			// What the transport does to a read of a connection it closed.
			return c.Conn.Read(p)
		}
	}
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

func (c *laggingConn) Close() error {
	c.l.once[2].Do(func() { close(c.l.closed) })
	return c.Conn.Close()
}
