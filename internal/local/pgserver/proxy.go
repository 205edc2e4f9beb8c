package pgserver

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// Fault is what a Proxy does to the next COMMIT a client sends.
type Fault int

const (
	// LoseCommitAnswer forwards the COMMIT, waits for the server's answer
	// (the transaction committed, or not) and drops the connection
	// instead of forwarding it: a connection lost at that moment.
	LoseCommitAnswer Fault = iota + 1
	// DropBeforeCommit drops the connection instead of forwarding the
	// COMMIT: the server rolls the transaction back.
	DropBeforeCommit
	// LoseCommitAnswerAndCrash is LoseCommitAnswer, then Crash: the
	// client cannot read the record to settle the commit until Recover.
	LoseCommitAnswerAndCrash
)

// Proxy forwards PostgreSQL connections to a server, message by message,
// and applies a fault to a COMMIT on request (Arm; a COMMIT sent as a
// simple query, as pgx sends it). Crash drops every
// connection and refuses new ones, as a host that died.
type Proxy struct {
	// Addr is the proxy's host:port; DSN its connection string.
	Addr, DSN string

	upstream string
	l        net.Listener
	mu       sync.Mutex
	armed    []Fault
	applied  int
	crashed  bool
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

// NewProxy listens on a free loopback port, forwarding to s, until t
// ends.
func NewProxy(t testing.TB, s *Server) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: l.Addr().String(), upstream: s.Addr, l: l, conns: map[net.Conn]struct{}{}}
	p.DSN = "postgres://postgres@" + p.Addr + "/postgres?sslmode=disable"
	p.wg.Go(p.serve)
	t.Cleanup(p.Close)
	return p
}

// Arm applies f to the next COMMIT a client sends, on any connection.
// Each call arms one fault, applied in order.
func (p *Proxy) Arm(f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = append(p.armed, f)
}

// Applied is how many armed faults have happened.
func (p *Proxy) Applied() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.applied
}

// Crash drops every connection and refuses every new one.
func (p *Proxy) Crash() {
	p.mu.Lock()
	p.crashed = true
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
}

// Recover accepts new connections again after a Crash.
func (p *Proxy) Recover() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.crashed = false
}

// Close stops the proxy, drops its connections and waits for its
// goroutines.
func (p *Proxy) Close() {
	_ = p.l.Close()
	p.Crash()
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.crashed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			_ = c.Close()
			continue
		}
		p.wg.Go(func() { p.forward(c) })
	}
}

// take returns the fault armed for a COMMIT, if any, counting it applied.
func (p *Proxy) take() Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.armed) == 0 {
		return 0
	}
	f := p.armed[0]
	p.armed = p.armed[1:]
	p.applied++
	return f
}

// forward relays one client connection. The client's messages are read
// one at a time (after the startup message, each is a type byte and a
// length), so that a COMMIT is seen whole; the server's are copied as
// they come, until a lost answer swallows them.
func (p *Proxy) forward(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return
	}
	if !p.track(server) {
		_ = server.Close()
		return
	}
	defer server.Close()
	// swallow is closed to make the server's side stop forwarding: it then
	// reads until the server's ReadyForQuery, the COMMIT's answer, and
	// drops both connections.
	swallow := make(chan struct{})
	answered := make(chan struct{})
	p.wg.Go(func() {
		defer close(answered)
		p.fromServer(server, client, swallow)
	})
	defer func() { <-answered }()

	// The startup message: a length, then the rest.
	if err := relay(client, server, false); err != nil {
		return
	}
	for {
		msg, err := readMessage(client, true)
		if err != nil {
			_ = server.Close()
			return
		}
		if isCommit(msg) {
			switch p.take() {
			case DropBeforeCommit:
				_ = server.Close()
				_ = client.Close()
				return
			case LoseCommitAnswer:
				close(swallow)
				_, _ = server.Write(msg)
				<-answered
				_ = client.Close()
				return
			case LoseCommitAnswerAndCrash:
				close(swallow)
				_, _ = server.Write(msg)
				<-answered
				p.Crash()
				_ = client.Close()
				return
			}
		}
		if _, err := server.Write(msg); err != nil {
			return
		}
	}
}

// fromServer copies the server's messages to the client until swallow is
// closed; then it reads, forwarding nothing, up to the ReadyForQuery that
// ends the COMMIT's answer, and closes the server's connection.
func (p *Proxy) fromServer(server, client net.Conn, swallow <-chan struct{}) {
	for {
		msg, err := readMessage(server, true)
		if err != nil {
			_ = client.Close()
			return
		}
		select {
		case <-swallow:
			if msg[0] == 'Z' {
				_ = server.Close()
				return
			}
			continue
		default:
		}
		if _, err := client.Write(msg); err != nil {
			return
		}
	}
}

// relay copies one message from src to dst.
func relay(src, dst net.Conn, typed bool) error {
	msg, err := readMessage(src, typed)
	if err != nil {
		return err
	}
	_, err = dst.Write(msg)
	return err
}

// readMessage reads one protocol message whole: a type byte (typed) and a
// length that counts itself.
func readMessage(r io.Reader, typed bool) ([]byte, error) {
	head := 4
	if typed {
		head = 5
	}
	buf := make([]byte, head, 64)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(buf[head-4:]))
	if n < 4 || n > 1<<30 {
		return nil, errors.New("pgserver proxy: a message of a length out of bounds")
	}
	buf = append(buf, make([]byte, n-4)...)
	_, err := io.ReadFull(r, buf[head:])
	return buf, err
}

// isCommit reports whether msg is a client's COMMIT: a simple query (Q),
// which is how pgx sends it (pgx.Tx's Commit).
func isCommit(msg []byte) bool {
	return msg[0] == 'Q' && bytes.EqualFold(bytes.TrimRight(bytes.TrimSpace(bytes.TrimRight(msg[5:], "\x00")), ";"), []byte("commit"))
}
