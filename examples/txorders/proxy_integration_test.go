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

// wireTrigger picks the commit among a database client's messages, by
// its type (PostgreSQL's message type; MySQL's command byte) and its
// payload after it.
type wireTrigger func(typ byte, payload []byte) bool

// wireMessage is one message of a database client's, whole: raw is
// forwarded as it came; typ and payload are what a wireTrigger sees, none
// (typ 0) for a message that is no command (a startup, a handshake).
type wireMessage struct {
	raw     []byte
	typ     byte
	payload []byte
}

// wireReader reads a client's next message from its connection's
// beginning: PostgreSQL's frontend (pgFrontend) or MySQL's client
// (mysqlClient). A reader has state (where in the connection it is): one
// per connection.
type wireReader func(r *bufio.Reader) (wireMessage, error)

// pgCommit is the transactional store's commit on PostgreSQL: pgx's
// COMMIT, a simple query.
func pgCommit(typ byte, payload []byte) bool {
	return typ == 'Q' && strings.EqualFold(strings.TrimRight(string(payload), "\x00; "), "commit")
}

// pgCompletion is the plain store's completion on PostgreSQL: the
// statement that sets the record COMPLETED, parsed (or sent as a simple
// query) before it runs. The acquire names COMPLETED only in its
// condition.
func pgCompletion(typ byte, payload []byte) bool {
	return (typ == 'P' || typ == 'Q') && bytes.Contains(payload, []byte("SET status = 'COMPLETED'"))
}

// MySQL's client commands: a text query, and a statement to prepare (how
// go-sql-driver runs a statement with arguments).
const (
	comQuery       = 0x03
	comStmtPrepare = 0x16
)

// mysqlCommit is the transactional store's commit on MySQL:
// go-sql-driver's COMMIT, a text query.
func mysqlCommit(typ byte, payload []byte) bool {
	return typ == comQuery && strings.EqualFold(strings.TrimRight(string(payload), "; "), "commit")
}

// mysqlCompletion is the plain store's completion on MySQL: the statement
// that sets the record COMPLETED, prepared (or sent as a text query)
// before it runs. The acquire names COMPLETED only in its condition.
func mysqlCompletion(typ byte, payload []byte) bool {
	return (typ == comStmtPrepare || typ == comQuery) && bytes.Contains(payload, []byte("SET status = 'COMPLETED'"))
}

// startWireProxy is a commitProxy in front of the database server at
// target (host:port): a TCP proxy that reads the client's messages with a
// reader of protocol's, one per connection, and acts on the first that
// trigger picks.
func startWireProxy(t *testing.T, target string, protocol func() wireReader, trigger wireTrigger, lose bool) *commitProxy {
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
			conns.Go(func() { p.relay(c, target, protocol(), trigger, lose, &fired) })
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		conns.Wait()
	})
	return p
}

// relay carries one connection. armed is set once the commit was
// forwarded with lose: what the server sends from then on is its answer
// (both protocols answer one command at a time), dropped.
func (p *commitProxy) relay(c net.Conn, target string, read wireReader, trigger wireTrigger, lose bool, fired *atomic.Bool) {
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
	p.client(bufio.NewReader(c), s, read, trigger, lose, fired, &armed)
	s.Close()
	<-done
}

// client forwards the client's messages to s until the client closes.
func (p *commitProxy) client(r *bufio.Reader, s net.Conn, read wireReader, trigger wireTrigger, lose bool, fired, armed *atomic.Bool) {
	for {
		msg, err := read(r)
		if err != nil {
			return
		}
		if msg.typ != 0 && trigger(msg.typ, msg.payload) && fired.CompareAndSwap(false, true) {
			if !lose {
				// Held: never forwarded; the client's death ends it.
				p.acted()
				_, _ = io.Copy(io.Discard, r)
				return
			}
			armed.Store(true)
		}
		if _, err := s.Write(msg.raw); err != nil {
			return
		}
	}
}

// pgFrontend reads PostgreSQL's frontend messages: the startup message
// (after an SSL or GSS encryption request, which sslmode=disable does not
// send), then typed messages.
func pgFrontend() wireReader {
	started := false
	return func(r *bufio.Reader) (wireMessage, error) {
		if !started {
			msg, err := readStartup(r)
			if err != nil {
				return wireMessage{}, err
			}
			if code := binary.BigEndian.Uint32(msg[4:8]); code != 80877103 && code != 80877104 {
				started = true
			}
			return wireMessage{raw: msg}, nil
		}
		var head [5]byte
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return wireMessage{}, err
		}
		n := int(binary.BigEndian.Uint32(head[1:])) - 4
		if n < 0 {
			return wireMessage{}, io.ErrUnexpectedEOF
		}
		raw := make([]byte, 5+n)
		copy(raw, head[:])
		if _, err := io.ReadFull(r, raw[5:]); err != nil {
			return wireMessage{}, err
		}
		return wireMessage{raw: raw, typ: head[0], payload: raw[5:]}, nil
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

// mysqlClient reads MySQL's client packets: a 3-byte little-endian
// length, a sequence id, the payload. A command opens a new exchange, its
// sequence id 0, and its first byte is the command; the handshake
// response and the authentication's packets that follow the server's are
// numbered on from 1, and are no command. (A payload of 16 MiB or more
// comes in several packets: the continuations, numbered on too, are no
// command either.)
func mysqlClient() wireReader {
	return func(r *bufio.Reader) (wireMessage, error) {
		var head [4]byte
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return wireMessage{}, err
		}
		n := int(head[0]) | int(head[1])<<8 | int(head[2])<<16
		raw := make([]byte, 4+n)
		copy(raw, head[:])
		if _, err := io.ReadFull(r, raw[4:]); err != nil {
			return wireMessage{}, err
		}
		if head[3] != 0 || n == 0 {
			return wireMessage{raw: raw}, nil
		}
		return wireMessage{raw: raw, typ: raw[4], payload: raw[5:]}, nil
	}
}
