package faultproxy_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
)

// seen is what the upstream test server received.
type seen struct {
	method, path, rawPath, query, host string
	header                             http.Header
	body                               []byte
}

// TestPassForwardsRequestAndResponseIntact checks that a passed request
// reaches the target as the client signed it, and its answer comes back as
// the target sent it; only hop-by-hop headers stay behind.
func TestPassForwardsRequestAndResponseIntact(t *testing.T) {
	t.Parallel()
	got := make(chan seen, 1)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.Path, r.URL.RawPath, r.URL.RawQuery, r.Host, r.Header.Clone(), body}
		w.Header().Set("X-Amz-Crc32", "12345")
		w.Header().Set("X-Amzn-Requestid", "req-1")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer upstream.Close()
	p, err := faultproxy.Start(upstream.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	body := []byte(`{"TableName":"t","Item":{"id":{"S":"a/b c"}}}`)
	req, err := http.NewRequest(http.MethodPost, p.URL+"/some/key%2Fwith%20escapes?x=1&y=%2F", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "dynamodb.us-east-1.amazonaws.com"
	end := map[string]string{
		"Authorization":         "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host;x-amz-date;x-amz-target, Signature=abc",
		"X-Amz-Date":            "20260101T000000Z",
		"X-Amz-Target":          "DynamoDB_20120810.PutItem",
		"Content-Type":          "application/x-amz-json-1.0",
		"Amz-Sdk-Invocation-Id": "inv-1",
	}
	for k, v := range end {
		req.Header.Set(k, v)
	}
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "for this connection only")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	respBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()

	var s seen
	select {
	case s = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the target")
	}
	if s.method != http.MethodPost || s.path != "/some/key/with escapes" || s.rawPath != "/some/key%2Fwith%20escapes" || s.query != "x=1&y=%2F" {
		t.Errorf("target saw %s path %q raw %q query %q", s.method, s.path, s.rawPath, s.query)
	}
	if s.host != req.Host {
		t.Errorf("target saw Host %q, want the signed %q", s.host, req.Host)
	}
	for k, v := range end {
		if s.header.Get(k) != v {
			t.Errorf("header %s = %q at the target, want %q", k, s.header.Get(k), v)
		}
	}
	if s.header.Get("X-Hop") != "" {
		t.Error("a header named in Connection was forwarded")
	}
	if !bytes.Equal(s.body, body) {
		t.Errorf("target saw body %q, want %q", s.body, body)
	}
	if resp.StatusCode != http.StatusCreated || string(respBody) != `{"ok":true}` || resp.Header.Get("X-Amz-Crc32") != "12345" || resp.Header.Get("X-Amzn-Requestid") != "req-1" {
		t.Errorf("client got %d %q %v, want the target's answer", resp.StatusCode, respBody, resp.Header)
	}
}

// TestCloseEndsADelayWithoutForwarding: Close does not wait out a delay, and
// the delayed request is lost, not sent late.
func TestCloseEndsADelayWithoutForwarding(t *testing.T) {
	t.Parallel()
	reached := make(chan struct{}, 1)
	upstream := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached <- struct{}{} }))
	defer upstream.Close()
	decided := make(chan struct{})
	p, err := faultproxy.Start(upstream.URL, faultproxy.WithObserver(func(string, []byte, http.Header, faultproxy.Fault) { close(decided) }))
	if err != nil {
		t.Fatal(err)
	}
	p.Script(faultproxy.AnyOperation, faultproxy.Delay(time.Hour))
	done := make(chan error, 1)
	go func() {
		resp, err := http.Post(p.URL, "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-decided // the request is in its delay
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Error("the delayed request got an answer")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the client still waits after Close")
	}
	if st := p.Stats(); st.Forwarded[""] != 0 {
		t.Errorf("forwarded %d requests, want none", st.Forwarded[""])
	}
	select {
	case <-reached:
		t.Error("the delayed request reached the target")
	default:
	}
	if err := p.Close(); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("second Close: %v", err)
	}
}

// TestCloseDoesNotWaitForASilentConnection: a connection a client opened
// and sent nothing on (an SDK retry's, dialled as its context ended) does
// not hold Close up. http.Server.Shutdown waited five seconds for such a
// connection, past Close's own bound, and TestDelayPastTheDeadline failed
// with "context deadline exceeded" on a busy machine.
func TestCloseDoesNotWaitForASilentConnection(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(http.NotFoundHandler())
	defer upstream.Close()
	p, err := faultproxy.Start(upstream.URL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A request answered on a second connection: the proxy accepts in
	// order, so by its answer it has accepted the silent one too.
	resp, err := http.Post(p.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := p.Close(); err != nil {
		t.Fatalf("Close with a silent connection open: %v", err)
	}
}

// TestObserverSeesTheRequestBody: the observer gets each request's operation
// and the body as sent, which is how a caller tells which item a fault hit.
func TestObserverSeesTheRequestBody(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer upstream.Close()
	type seen struct {
		op, body string
		kind     faultproxy.Kind
	}
	got := make(chan seen, 1)
	p, err := faultproxy.Start(upstream.URL, faultproxy.WithObserver(func(op string, body []byte, _ http.Header, f faultproxy.Fault) {
		got <- seen{op, string(body), faultproxy.KindOf(f)}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Script("UpdateItem", faultproxy.FailBefore)
	const body = `{"TableName":"t","Key":{"id":{"S":"p#order-1"}}}`
	req, err := http.NewRequest(http.MethodPost, p.URL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.UpdateItem")
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s := <-got; s != (seen{"UpdateItem", body, faultproxy.FailBefore}) {
		t.Errorf("observed %+v", s)
	}
}
