package sqlproxy

import (
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

// Protocol is what a Proxy knows of a wire protocol. The proxy reads each
// side's messages whole, so that a COMMIT is seen whole and the end of
// its answer is found; it never reorders or merges them.
type Protocol interface {
	// FromClient reads the client's next message whole; first is true for
	// the connection's first message. An error ends the connection: a
	// read that failed, or a message the proxy refuses.
	FromClient(r io.Reader, first bool) ([]byte, error)
	// FromServer reads the server's next message whole, as the proxy
	// forwards it (a greeting rewritten); first is true for the
	// connection's first message.
	FromServer(r io.Reader, first bool) ([]byte, error)
	// IsCommit reports whether msg, the client's, is a COMMIT.
	IsCommit(msg []byte) bool
	// EndsAnswer reports whether msg, the server's after a COMMIT, is the
	// last message of the COMMIT's answer.
	EndsAnswer(msg []byte) bool
}

// Proxy forwards connections to a server, message by message, and applies
// a fault to a COMMIT on request (Arm). Crash drops every connection and
// refuses new ones, as a host that died.
type Proxy struct {
	// Addr is the proxy's host:port; DSN the server's package sets: its
	// data source name through the proxy.
	Addr, DSN string

	upstream string
	proto    Protocol
	l        net.Listener
	mu       sync.Mutex
	armed    []Fault
	applied  int
	crashed  bool
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

// New listens on a free loopback port, forwarding to upstream (host:port)
// speaking proto, until t ends.
func New(t testing.TB, upstream string, proto Protocol) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: l.Addr().String(), upstream: upstream, proto: proto, l: l, conns: map[net.Conn]struct{}{}}
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

// track records c, to be dropped by a Crash; false, after a Crash, when c
// must be refused.
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
// one at a time, so that a COMMIT is seen whole; the server's are relayed
// as they come, until a lost answer swallows them.
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
	// reads the COMMIT's answer, forwards nothing, and drops the server's
	// connection.
	swallow := make(chan struct{})
	answered := make(chan struct{})
	p.wg.Go(func() {
		defer close(answered)
		p.fromServer(server, client, swallow)
	})
	defer func() { <-answered }()

	for first := true; ; first = false {
		msg, err := p.proto.FromClient(client, first)
		if err != nil {
			_ = server.Close()
			return
		}
		if p.proto.IsCommit(msg) {
			switch f := p.take(); f {
			case DropBeforeCommit:
				_ = server.Close()
				_ = client.Close()
				return
			case LoseCommitAnswer, LoseCommitAnswerAndCrash:
				close(swallow)
				_, _ = server.Write(msg)
				// The client must not see its connection end before the
				// server has answered: a store that then reads the record
				// must find the commit applied.
				<-answered
				if f == LoseCommitAnswerAndCrash {
					p.Crash()
				}
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
// closed; then it reads, forwarding nothing, up to the message that ends
// the COMMIT's answer, and closes the server's connection. The protocols
// are a dialogue: once the client has sent the COMMIT, whatever the server
// sends next is its answer.
func (p *Proxy) fromServer(server, client net.Conn, swallow <-chan struct{}) {
	for first := true; ; first = false {
		msg, err := p.proto.FromServer(server, first)
		if err != nil {
			_ = client.Close()
			return
		}
		select {
		case <-swallow:
			if p.proto.EndsAnswer(msg) {
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
