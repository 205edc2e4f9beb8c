package mariaserver

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

// MySQL protocol constants the proxy needs.
const (
	// maxPayload is the largest payload of one packet: a longer one is
	// split, and a packet of exactly this length is followed by more.
	maxPayload = 1<<24 - 1
	// comQuery is the command byte of a text query (COM_QUERY).
	comQuery = 0x03
	// handshakeV10 is the first byte of the server's greeting.
	handshakeV10 = 0x0a
	// clientSSL and clientCompress are capability flags: the greeting's
	// lower two bytes and the client's answer carry them.
	clientSSL      = 0x0800
	clientCompress = 0x0020
)

// Proxy forwards MySQL-protocol connections to a server, packet by packet,
// and applies a fault to a COMMIT on request (Arm; a COMMIT sent as a text
// query, COM_QUERY "COMMIT", as go-sql-driver/mysql's Tx.Commit and the
// mariadb client send it). Crash drops every connection and refuses new
// ones, as a host that died.
//
// The proxy reads plain packets only: it clears TLS from the server's
// capabilities in its greeting, so that a client that would use TLS
// when offered speaks plain, and it drops a client that asks for
// compression (go-sql-driver/mysql's compress=true), whose frames it
// cannot read.
type Proxy struct {
	// Addr is the proxy's host:port; DSN the data source name of the
	// server's database as root through the proxy, as Server.DSN.
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
	p.DSN = "root@tcp(" + p.Addr + ")/" + Database
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

// forward relays one client connection. The client's packets are read
// one at a time, so that a COMMIT is seen whole; the server's are copied
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
	// reads the COMMIT's answer (an OK or an ERR packet), forwards
	// nothing, and drops the server's connection.
	swallow := make(chan struct{})
	answered := make(chan struct{})
	p.wg.Go(func() {
		defer close(answered)
		p.fromServer(server, client, swallow)
	})
	defer func() { <-answered }()

	for first := true; ; first = false {
		pkt, err := readPacket(client)
		if err != nil {
			_ = server.Close()
			return
		}
		// The client's first packet answers the greeting.
		if first && asksCompression(pkt) {
			_ = server.Close()
			return
		}
		if isCommit(pkt) {
			switch p.take() {
			case DropBeforeCommit:
				_ = server.Close()
				_ = client.Close()
				return
			case LoseCommitAnswer:
				close(swallow)
				_, _ = server.Write(pkt)
				<-answered
				_ = client.Close()
				return
			case LoseCommitAnswerAndCrash:
				close(swallow)
				_, _ = server.Write(pkt)
				<-answered
				p.Crash()
				_ = client.Close()
				return
			}
		}
		if _, err := server.Write(pkt); err != nil {
			return
		}
	}
}

// fromServer copies the server's packets to the client, its greeting
// without TLS, until swallow is closed; then it reads, forwarding nothing,
// up to the OK or ERR packet that answers the COMMIT, and closes the
// server's connection. The protocol is a dialogue: once the client has
// sent the COMMIT, whatever the server sends next is its answer.
func (p *Proxy) fromServer(server, client net.Conn, swallow <-chan struct{}) {
	first := true
	for {
		pkt, err := readPacket(server)
		if err != nil {
			_ = client.Close()
			return
		}
		if first {
			withoutTLS(pkt)
			first = false
		}
		select {
		case <-swallow:
			if len(pkt) > 4 && (pkt[4] == 0x00 || pkt[4] == 0xff) {
				_ = server.Close()
				return
			}
			continue
		default:
		}
		if _, err := client.Write(pkt); err != nil {
			return
		}
	}
}

// readPacket reads one protocol packet whole: its header (a 3-byte
// little-endian payload length and a sequence id) and its payload. A
// payload of maxPayload bytes continues in the next packet, which the
// caller reads next.
func readPacket(r io.Reader) ([]byte, error) {
	head := make([]byte, 4, 64)
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, err
	}
	n := int(head[0]) | int(head[1])<<8 | int(head[2])<<16
	pkt := append(head, make([]byte, n)...)
	if _, err := io.ReadFull(r, pkt[4:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return pkt, nil
}

// isCommit reports whether pkt is a client's COMMIT: the first packet of
// a command (sequence id 0: the rest of a command longer than a packet
// comes in packets numbered from 1, and the protocol caps a command far
// below 256 packets), a text query (COM_QUERY) whose text is COMMIT in any
// case, as go-sql-driver/mysql's Tx.Commit sends it.
func isCommit(pkt []byte) bool {
	if len(pkt) < 5 || pkt[3] != 0 || pkt[4] != comQuery {
		return false
	}
	text := bytes.TrimSpace(bytes.TrimRight(bytes.TrimSpace(pkt[5:]), ";"))
	return bytes.EqualFold(text, []byte("commit"))
}

// withoutTLS clears the TLS capability in pkt when it is the server's
// greeting (protocol 10): after its server version (NUL-terminated), a
// connection id (4 bytes), the first part of the auth data (8) and a
// filler (1) come the capabilities' lower two bytes, little-endian.
func withoutTLS(pkt []byte) {
	if len(pkt) < 5 || pkt[4] != handshakeV10 {
		return
	}
	end := bytes.IndexByte(pkt[5:], 0)
	if end < 0 {
		return
	}
	at := 5 + end + 1 + 4 + 8 + 1
	if len(pkt) < at+2 {
		return
	}
	caps := binary.LittleEndian.Uint16(pkt[at:])
	binary.LittleEndian.PutUint16(pkt[at:], caps&^clientSSL)
}

// asksCompression reports whether pkt, a client's answer to the greeting
// (its capabilities first, 4 bytes little-endian), asks for compression.
func asksCompression(pkt []byte) bool {
	return len(pkt) >= 8 && binary.LittleEndian.Uint32(pkt[4:])&clientCompress != 0
}
