//go:build integration

package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// A commitProxy stands between the program and its server and acts on the
// program's commit request (or, for the emit tests, its send): the first
// request trigger picks. Held, it is never forwarded (the commit not
// applied) and its connection stays open until the program dies; lost, it
// is forwarded and applied, and its answer never returned; reset (HTTP
// only), it is forwarded and applied, and its connection reset instead of
// the answer, which the SDK's retry takes for a failed call and sends
// again. hit is closed once it has acted: the commit held, or applied.
type commitProxy struct {
	addr string
	hit  chan struct{}
	once sync.Once
}

func (p *commitProxy) acted() { p.once.Do(func() { close(p.hit) }) }

// dynamoTrigger picks the commit among the AWS JSON calls that go to
// moto_server, by the call's X-Amz-Target operation (DynamoDB's without
// its "DynamoDB_20120810." prefix, SQS's with its "AmazonSQS.") and its
// JSON body.
type dynamoTrigger func(op string, body []byte) bool

// sqsSendBatch is the send of emitted messages after the commit
// (targets.Sender's SendMessageBatch).
func sqsSendBatch(op string, _ []byte) bool { return op == "AmazonSQS.SendMessageBatch" }

// proxyAction is what a commitProxy does to the request it picks.
type proxyAction int

const (
	holdRequest proxyAction = iota // never forwarded
	loseAnswer                     // forwarded; its answer held until the program dies
	resetAnswer                    // forwarded; its connection reset instead of the answer
)

// transactWrite is the transactional store's commit: the record's
// completion and the handler's writes in one TransactWriteItems.
func transactWrite(op string, _ []byte) bool { return op == "TransactWriteItems" }

// completionUpdate is the plain store's completion: the UpdateItem that
// sets the record COMPLETED (the acquire, which names COMPLETED in its
// condition, is the one that asks for the old item).
func completionUpdate(op string, body []byte) bool {
	if op != "UpdateItem" {
		return false
	}
	var in struct {
		ExpressionAttributeValues map[string]map[string]any
		ReturnValues              string
	}
	if json.Unmarshal(body, &in) != nil || in.ReturnValues == "ALL_OLD" {
		return false
	}
	for _, v := range in.ExpressionAttributeValues {
		if v["S"] == "COMPLETED" {
			return true
		}
	}
	return false
}

// startDynamoProxy is a commitProxy in front of the moto_server endpoint
// target (an HTTP proxy: the SDK's endpoint is set to its URL, for
// DynamoDB and SQS alike).
func startDynamoProxy(t *testing.T, target string, trigger dynamoTrigger, action proxyAction) *commitProxy {
	t.Helper()
	p := &commitProxy{hit: make(chan struct{})}
	var fired atomic.Bool
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
		act := trigger(op, body) && fired.CompareAndSwap(false, true)
		if act && action == holdRequest {
			p.acted()
			<-r.Context().Done() // the program killed
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		answer, err := io.ReadAll(resp.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		if act && action == resetAnswer {
			resetConn(w)
			p.acted()
			return
		}
		if act {
			p.acted()
			<-r.Context().Done()
			return
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(answer)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	p.addr = "http://" + ln.Addr().String()
	return p
}

// resetConn closes the connection of w with a TCP reset, the answer
// unwritten.
func resetConn(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		// Not on net/http's HTTP/1 server: a failure instead of the
		// answer does as well.
		http.Error(w, "the answer lost", http.StatusBadGateway)
		return
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0) // close sends RST: the answer is gone
	}
	_ = conn.Close()
}

// pgTrigger picks the commit among the frontend messages of PostgreSQL's
// protocol, by type and payload.
type pgTrigger func(typ byte, payload []byte) bool

// commitStatement is the transactional store's commit: pgx's COMMIT, a
// simple query.
func commitStatement(typ byte, payload []byte) bool {
	return typ == 'Q' && strings.EqualFold(strings.TrimRight(string(payload), "\x00; "), "commit")
}

// completionStatement is the plain store's completion: the statement that
// sets the record COMPLETED, parsed (or sent as a simple query) before it
// runs. The acquire names COMPLETED only in its condition.
func completionStatement(typ byte, payload []byte) bool {
	return (typ == 'P' || typ == 'Q') && bytes.Contains(payload, []byte("SET status = 'COMPLETED'"))
}

// startPostgresProxy is a commitProxy in front of the PostgreSQL server at
// target (host:port): a TCP proxy that reads the frontend's messages.
func startPostgresProxy(t *testing.T, target string, trigger pgTrigger, lose bool) *commitProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &commitProxy{hit: make(chan struct{}), addr: ln.Addr().String()}
	var fired atomic.Bool
	var conns sync.WaitGroup
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Go(func() { p.relay(c, target, trigger, lose, &fired) })
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		conns.Wait()
	})
	return p
}

// relay carries one connection. armed is set once the commit was
// forwarded with lose: what the server sends from then on is its answer,
// dropped.
func (p *commitProxy) relay(c net.Conn, target string, trigger pgTrigger, lose bool, fired *atomic.Bool) {
	defer c.Close()
	s, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer s.Close()
	var armed atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer c.Close()
		buf := make([]byte, 32<<10)
		for {
			n, err := s.Read(buf)
			if n > 0 && armed.Load() {
				// COMMIT's answer: the server has committed.
				p.acted()
				_, _ = io.Copy(io.Discard, s)
				return
			}
			if n > 0 {
				if _, werr := c.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	p.frontend(bufio.NewReader(c), s, trigger, lose, fired, &armed)
	s.Close()
	<-done
}

// frontend forwards the client's messages to s until the client closes:
// the startup message (after an SSL or GSS encryption request, which
// sslmode=disable does not send), then typed messages.
func (p *commitProxy) frontend(r *bufio.Reader, s net.Conn, trigger pgTrigger, lose bool, fired, armed *atomic.Bool) {
	for {
		msg, err := readStartup(r)
		if err != nil {
			return
		}
		if _, err := s.Write(msg); err != nil {
			return
		}
		if code := binary.BigEndian.Uint32(msg[4:8]); code != 80877103 && code != 80877104 {
			break
		}
	}
	for {
		var head [5]byte
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(head[1:])) - 4
		if n < 0 {
			return
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			return
		}
		if trigger(head[0], payload) && fired.CompareAndSwap(false, true) {
			if !lose {
				// Held: never forwarded; the client's death ends it.
				p.acted()
				_, _ = io.Copy(io.Discard, r)
				return
			}
			armed.Store(true)
		}
		if _, err := s.Write(append(head[:], payload...)); err != nil {
			return
		}
	}
}

// readStartup reads an untyped message: its length, then the rest.
func readStartup(r *bufio.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := int(binary.BigEndian.Uint32(n[:]))
	if size < 8 || size > 10000 {
		return nil, io.ErrUnexpectedEOF
	}
	msg := make([]byte, size)
	copy(msg, n[:])
	_, err := io.ReadFull(r, msg[4:])
	return msg, err
}
