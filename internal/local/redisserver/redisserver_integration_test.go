//go:build integration

package redisserver_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/internal/local/redisserver"
)

// respConn is a minimal RESP client, enough for these tests, so that the
// root module requires no Redis driver: one command at a time, no retry.
type respConn struct {
	c net.Conn
	r *bufio.Reader
}

// reply is one answer: Str for a simple or bulk string (Nil for a null
// bulk string), Int for an integer, Arr for an array of bulk strings.
type reply struct {
	Str string
	Int int64
	Arr []string
	Nil bool
}

// redisError is an error reply from the server.
type redisError string

func (e redisError) Error() string { return string(e) }

const respTimeout = 5 * time.Second

func dial(addr string) (*respConn, error) {
	c, err := net.DialTimeout("tcp", addr, respTimeout)
	if err != nil {
		return nil, err
	}
	return &respConn{c: c, r: bufio.NewReader(c)}, nil
}

func mustDial(t *testing.T, addr string) *respConn {
	t.Helper()
	c, err := dial(addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func (c *respConn) Close() error { return c.c.Close() }

// Do sends args as an array of bulk strings and reads one reply.
func (c *respConn) Do(args ...string) (reply, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if err := c.c.SetDeadline(time.Now().Add(respTimeout)); err != nil {
		return reply{}, err
	}
	if _, err := io.WriteString(c.c, b.String()); err != nil {
		return reply{}, err
	}
	return c.read()
}

func (c *respConn) line() (string, error) {
	s, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if !strings.HasSuffix(s, "\r\n") {
		return "", fmt.Errorf("RESP line %q without CRLF", s)
	}
	return s[:len(s)-2], nil
}

func (c *respConn) bulk(n int) (string, error) {
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(c.r, buf); err != nil {
		return "", err
	}
	if string(buf[n:]) != "\r\n" {
		return "", fmt.Errorf("bulk string of %d bytes without CRLF", n)
	}
	return string(buf[:n]), nil
}

func (c *respConn) read() (reply, error) {
	s, err := c.line()
	if err != nil {
		return reply{}, err
	}
	if s == "" {
		return reply{}, errors.New("empty RESP line")
	}
	switch body := s[1:]; s[0] {
	case '+':
		return reply{Str: body}, nil
	case '-':
		return reply{}, redisError(body)
	case ':':
		n, err := strconv.ParseInt(body, 10, 64)
		return reply{Int: n}, err
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil {
			return reply{}, err
		}
		if n < 0 {
			return reply{Nil: true}, nil
		}
		v, err := c.bulk(n)
		return reply{Str: v}, err
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil {
			return reply{}, err
		}
		if n < 0 {
			return reply{Nil: true}, nil
		}
		arr := make([]string, n)
		for i := range arr {
			h, err := c.line()
			if err != nil {
				return reply{}, err
			}
			if !strings.HasPrefix(h, "$") {
				return reply{}, fmt.Errorf("array element %q: want a bulk string", h)
			}
			m, err := strconv.Atoi(h[1:])
			if err != nil {
				return reply{}, err
			}
			if m >= 0 {
				if arr[i], err = c.bulk(m); err != nil {
					return reply{}, err
				}
			}
		}
		return reply{Arr: arr}, nil
	}
	return reply{}, fmt.Errorf("unknown RESP reply %q", s)
}

// TestStartRestartStop: the server answers, a restart empties it and it
// answers again on the same address, and a stopped server refuses.
func TestStartRestartStop(t *testing.T) {
	srv := redisserver.Start(t)
	c := mustDial(t, srv.Addr)
	if _, err := c.Do("SET", "k", "v"); err != nil {
		t.Fatalf("SET on a started server: %v\n%s", err, srv.Log())
	}
	// No persistence: nothing on disk.
	r, err := c.Do("CONFIG", "GET", "appendonly")
	if err != nil || len(r.Arr) != 2 || r.Arr[0] != "appendonly" || r.Arr[1] != "no" {
		t.Errorf("CONFIG GET appendonly = %q, %v; want [appendonly no]", r.Arr, err)
	}
	srv.Restart()
	// The old connection is gone: dial again.
	c = mustDial(t, srv.Addr)
	if r, err := c.Do("EXISTS", "k"); err != nil || r.Int != 0 {
		t.Errorf("after Restart, EXISTS k = %d, %v; want 0: a server without persistence comes back empty", r.Int, err)
	}
	srv.Stop()
	if c2, err := dial(srv.Addr); err == nil {
		_, err = c2.Do("PING")
		_ = c2.Close()
		if err == nil {
			t.Error("PING on a stopped server succeeded")
		}
	}
	srv.Stop() // again: nothing
}

// TestProxyLosesOneAnswer: the proxy forwards, and an armed loss drops
// the answer of the matching command after the server applied it.
func TestProxyLosesOneAnswer(t *testing.T) {
	srv := redisserver.Start(t)
	p := redisserver.NewProxy(t, srv.Addr)
	via := mustDial(t, p.Addr)
	direct := mustDial(t, srv.Addr)
	if _, err := via.Do("SET", "a", "1"); err != nil {
		t.Fatalf("SET through the proxy: %v", err)
	}
	p.LoseAnswer([]byte("INCR"))
	if r, err := via.Do("INCR", "n"); err == nil {
		t.Fatalf("INCR whose answer was lost succeeded: %d", r.Int)
	}
	if p.Lost() != 1 || p.Armed() != 0 {
		t.Errorf("Lost %d, Armed %d; want 1, 0", p.Lost(), p.Armed())
	}
	if r, err := direct.Do("GET", "n"); err != nil || r.Str != "1" {
		t.Errorf("the server has n = %q (%v); want 1: the command was applied, only its answer lost", r.Str, err)
	}
	// The connection whose answer was lost is closed: a new one works.
	via = mustDial(t, p.Addr)
	if r, err := via.Do("GET", "a"); err != nil || r.Str != "1" {
		t.Errorf("GET through the proxy after the loss: %q, %v; want the next connection to work", r.Str, err)
	}
}
