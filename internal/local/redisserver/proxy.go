package redisserver

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards TCP connections to a server, byte for byte, and loses an
// answer on request (LoseAnswer): the command reaches the server, which
// applies it and answers, and the connection is closed before the answer
// reaches the client.
type Proxy struct {
	// Addr is the proxy's host:port, for the client.
	Addr string

	upstream string
	l        net.Listener
	mu       sync.Mutex
	match    [][]byte // armed losses, in order
	lost     atomic.Int64
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

// NewProxy listens on a free loopback port, forwarding to upstream, until
// t ends.
func NewProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: l.Addr().String(), upstream: upstream, l: l, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.serve)
	t.Cleanup(p.Close)
	return p
}

// LoseAnswer arms a loss: the next command whose bytes contain match (a
// command name such as "EVALSHA", or an argument only that command
// carries; compared without regard to case, since go-redis sends command
// names in lower case) is forwarded, and its answer is dropped with the
// connection. Each call arms one loss.
func (p *Proxy) LoseAnswer(match []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.match = append(p.match, bytes.ToLower(match))
}

// Lost is how many answers the proxy has dropped.
func (p *Proxy) Lost() int { return int(p.lost.Load()) }

// Armed is how many armed losses have not happened yet.
func (p *Proxy) Armed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.match)
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() {
	_ = p.l.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) serve() {
	for {
		client, err := p.l.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.forward(client) })
	}
}

// take disarms and reports the first armed loss that chunk matches.
func (p *Proxy) take(chunk []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.match) == 0 {
		return false
	}
	lower := bytes.ToLower(chunk)
	for i, m := range p.match {
		if bytes.Contains(lower, m) {
			p.match = append(p.match[:i], p.match[i+1:]...)
			return true
		}
	}
	return false
}

func (p *Proxy) track(c net.Conn, on bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		if p.conns == nil {
			return false
		}
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
	return true
}

func (p *Proxy) forward(client net.Conn) {
	server, err := net.Dial("tcp", p.upstream)
	if err != nil {
		_ = client.Close()
		return
	}
	p.track(client, true)
	p.track(server, true)
	defer func() {
		_ = client.Close()
		_ = server.Close()
		p.track(client, false)
		p.track(server, false)
	}()
	// dropNext: the command just forwarded is one whose answer is lost.
	// The client sends one command and waits for its answer (go-redis
	// does, outside a pipeline), so the next bytes from the server are
	// that answer.
	var dropNext atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64*1024)
		for {
			n, err := server.Read(buf)
			if n > 0 {
				if dropNext.Load() {
					// The server applied the command and answered: the
					// answer is lost with the connection.
					p.lost.Add(1)
					_ = client.Close()
					_ = server.Close()
					return
				}
				if _, werr := client.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				_ = client.Close()
				return
			}
		}
	}()
	buf := make([]byte, 64*1024)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			if p.take(buf[:n]) {
				dropNext.Store(true)
			}
			if _, werr := server.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = server.Close()
			}
			break
		}
	}
	_ = server.Close()
	<-done
}
