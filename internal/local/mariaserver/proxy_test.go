package mariaserver

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// packet is a protocol packet: the header (length, seq) and payload.
func packet(seq byte, payload []byte) []byte {
	n := len(payload)
	return append([]byte{byte(n), byte(n >> 8), byte(n >> 16), seq}, payload...)
}

// query is the packet of a text query (COM_QUERY) carrying sql, the first
// of its command.
func query(sql string) []byte {
	return packet(0, append([]byte{comQuery}, sql...))
}

// TestIsCommit: the proxy's faults apply to a COMMIT as go-sql-driver/mysql
// sends it, in any case, and to nothing else: not another query, not a
// prepared statement's, not a packet in the middle of a command.
func TestIsCommit(t *testing.T) {
	for sql, want := range map[string]bool{
		"COMMIT": true, "commit": true, " Commit; ": true,
		"COMMIT_X": false, "SELECT 'COMMIT'": false, "ROLLBACK": false, "": false,
	} {
		if got := isCommit(query(sql)); got != want {
			t.Errorf("isCommit(COM_QUERY %q) = %v; want %v", sql, got, want)
		}
	}
	prepare := packet(0, append([]byte{0x16}, "COMMIT"...)) // COM_STMT_PREPARE
	if isCommit(prepare) {
		t.Error("isCommit of a COM_STMT_PREPARE is true; the proxy matches text queries only")
	}
	later := packet(1, append([]byte{comQuery}, "COMMIT"...))
	if isCommit(later) {
		t.Error("isCommit of a packet of sequence id 1 is true; a command starts at 0")
	}
}

// TestReadPacket: a packet is read whole, header and payload; a payload
// of 16 MB - 1 bytes is one packet, the rest of its command the next; a
// packet cut short is an error.
func TestReadPacket(t *testing.T) {
	msg := query("SELECT 1")
	r := bytes.NewReader(append(append([]byte(nil), msg...), 0xff))
	got, err := readPacket(r)
	if err != nil || !bytes.Equal(got, msg) {
		t.Errorf("readPacket = %q, %v; want %q", got, err, msg)
	}

	full := packet(0, append([]byte{comQuery}, bytes.Repeat([]byte{'x'}, maxPayload-1)...))
	rest := packet(1, []byte("COMMIT"))
	r = bytes.NewReader(append(append([]byte(nil), full...), rest...))
	if got, err := readPacket(r); err != nil || len(got) != 4+maxPayload {
		t.Fatalf("readPacket of a full packet: %d bytes, %v; want %d", len(got), err, 4+maxPayload)
	}
	if got, err := readPacket(r); err != nil || !bytes.Equal(got, rest) {
		t.Errorf("readPacket after a full packet = %q, %v; want %q", got, err, rest)
	}

	if _, err := readPacket(bytes.NewReader(msg[:len(msg)-1])); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("readPacket of a packet cut short: %v; want io.ErrUnexpectedEOF", err)
	}
}

// greeting is a server's protocol-10 greeting offering caps.
func greeting(caps uint16) []byte {
	p := []byte{handshakeV10}
	p = append(p, "10.11.19-MariaDB\x00"...)
	p = append(p, 1, 0, 0, 0)    // connection id
	p = append(p, "abcdefgh"...) // auth data, part 1
	p = append(p, 0)             // filler
	p = binary.LittleEndian.AppendUint16(p, caps)
	p = append(p, 45, 2, 0) // charset, status
	return packet(0, p)
}

// capsOf reads the lower capabilities of a greeting.
func capsOf(t *testing.T, pkt []byte) uint16 {
	t.Helper()
	at := 5 + len("10.11.19-MariaDB\x00") + 4 + 8 + 1
	if len(pkt) < at+2 {
		t.Fatalf("greeting of %d bytes", len(pkt))
	}
	return binary.LittleEndian.Uint16(pkt[at:])
}

// TestWithoutTLS: the server's greeting reaches the client without TLS
// and with every other capability; another packet is left alone.
func TestWithoutTLS(t *testing.T) {
	const protocol41 = 0x0200
	g := greeting(clientSSL | protocol41 | clientCompress)
	withoutTLS(g)
	if got := capsOf(t, g); got != protocol41|clientCompress {
		t.Errorf("capabilities %#x after withoutTLS; want %#x", got, protocol41|clientCompress)
	}
	ok := packet(2, []byte{0, 0, 0, 2, 0, 0, 0})
	before := bytes.Clone(ok)
	withoutTLS(ok)
	if !bytes.Equal(ok, before) {
		t.Errorf("withoutTLS changed an OK packet: %q", ok)
	}
}

// fakeServer answers connections as a MySQL server would, far enough for
// the proxy: a greeting offering TLS, an OK to the client's answer, then
// an OK to every command. It sends each COMMIT it receives on commits, and
// one value on ends as each connection ends. With hold set, it answers a
// COMMIT only once hold is closed.
type fakeServer struct {
	addr    string
	commits chan struct{}
	ends    chan struct{}
	hold    chan struct{}
}

func newFakeServer(t *testing.T) *fakeServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	f := &fakeServer{addr: l.Addr().String(), commits: make(chan struct{}, 8), ends: make(chan struct{}, 8)}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go f.answer(c)
		}
	}()
	return f
}

func (f *fakeServer) answer(c net.Conn) {
	defer func() { f.ends <- struct{}{} }()
	defer c.Close()
	if _, err := c.Write(greeting(clientSSL | 0x0200)); err != nil {
		return
	}
	for {
		pkt, err := readPacket(c)
		if err != nil {
			return
		}
		if isCommit(pkt) {
			f.commits <- struct{}{}
			if f.hold != nil {
				<-f.hold
			}
		}
		if _, err := c.Write(packet(pkt[3]+1, []byte{0, 0, 0, 2, 0, 0, 0})); err != nil {
			return
		}
	}
}

// waitEnd waits, bounded, for a connection to the server to end.
func (f *fakeServer) waitEnd(t *testing.T) {
	t.Helper()
	select {
	case <-f.ends:
	case <-time.After(10 * time.Second):
		t.Fatal("the server's connection did not end within 10 s")
	}
}

// fakeClient connects through the proxy and logs in, as far as the fake
// server asks: it reads the greeting and answers it.
func fakeClient(t *testing.T, addr string) (net.Conn, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	g, err := readPacket(c)
	if err != nil {
		t.Fatalf("read the greeting through the proxy: %v", err)
	}
	if _, err := c.Write(packet(1, []byte{0x00, 0x02, 0, 0, 'r', 'o', 'o', 't', 0})); err != nil {
		t.Fatal(err)
	}
	if _, err := readPacket(c); err != nil {
		t.Fatalf("read the login's OK through the proxy: %v", err)
	}
	return c, g
}

// roundTrip sends a query and reads its answer.
func roundTrip(c net.Conn, sql string) ([]byte, error) {
	if _, err := c.Write(query(sql)); err != nil {
		return nil, err
	}
	return readPacket(c)
}

// TestProxyFaults: through the proxy, with no fault armed a COMMIT is
// answered; LoseCommitAnswer delivers the COMMIT to the server and the
// client reads the end of the connection instead of its answer;
// DropBeforeCommit ends the server's connection without the COMMIT;
// LoseCommitAnswerAndCrash refuses new connections until Recover. The
// greeting reaches the client without TLS.
func TestProxyFaults(t *testing.T) {
	t.Run("none", func(t *testing.T) {
		f := newFakeServer(t)
		p := NewProxy(t, &Server{Addr: f.addr})
		c, g := fakeClient(t, p.Addr)
		if capsOf(t, g)&clientSSL != 0 {
			t.Error("the greeting through the proxy offers TLS")
		}
		for _, sql := range []string{"BEGIN", "COMMIT"} {
			if ans, err := roundTrip(c, sql); err != nil || ans[4] != 0 {
				t.Fatalf("%s through the proxy: %q, %v; want an OK", sql, ans, err)
			}
		}
		if len(f.commits) != 1 || p.Applied() != 0 {
			t.Errorf("the server saw %d COMMITs, %d faults applied; want 1, 0", len(f.commits), p.Applied())
		}
	})
	t.Run("LoseCommitAnswer", func(t *testing.T) {
		f := newFakeServer(t)
		f.hold = make(chan struct{})
		p := NewProxy(t, &Server{Addr: f.addr})
		c, _ := fakeClient(t, p.Addr)
		p.Arm(LoseCommitAnswer)
		if _, err := roundTrip(c, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		read := make(chan error, 1)
		go func() {
			ans, err := roundTrip(c, "COMMIT")
			if err == nil {
				err = fmt.Errorf("the client read %q after its COMMIT; want the connection lost", ans)
			} else {
				err = nil
			}
			read <- err
		}()
		// The client must not see the connection end before the server
		// has answered: a store that then reads the record must find the
		// commit applied. While the server holds its answer, the client's
		// read stays blocked (a window, not a sleep the test relies on to
		// pass: the proxy never ends it early, a proxy that does fails).
		<-f.commits
		select {
		case err := <-read:
			t.Fatalf("the client's read ended (%v) before the server answered the COMMIT", err)
		case <-time.After(200 * time.Millisecond):
		}
		close(f.hold)
		if err := <-read; err != nil {
			t.Fatal(err)
		}
		f.waitEnd(t)
		if p.Applied() != 1 {
			t.Errorf("%d faults applied; want 1", p.Applied())
		}
	})
	t.Run("DropBeforeCommit", func(t *testing.T) {
		f := newFakeServer(t)
		p := NewProxy(t, &Server{Addr: f.addr})
		c, _ := fakeClient(t, p.Addr)
		p.Arm(DropBeforeCommit)
		if ans, err := roundTrip(c, "commit;"); err == nil {
			t.Fatalf("the client read %q after its COMMIT; want the connection lost", ans)
		}
		f.waitEnd(t)
		if len(f.commits) != 0 || p.Applied() != 1 {
			t.Errorf("the server saw %d COMMITs, %d faults applied; want 0, 1", len(f.commits), p.Applied())
		}
	})
	t.Run("LoseCommitAnswerAndCrash", func(t *testing.T) {
		f := newFakeServer(t)
		p := NewProxy(t, &Server{Addr: f.addr})
		c, _ := fakeClient(t, p.Addr)
		p.Arm(LoseCommitAnswerAndCrash)
		if ans, err := roundTrip(c, "COMMIT"); err == nil {
			t.Fatalf("the client read %q after its COMMIT; want the connection lost", ans)
		}
		f.waitEnd(t)
		if len(f.commits) != 1 {
			t.Errorf("the server saw %d COMMITs; want 1", len(f.commits))
		}
		refused, err := net.Dial("tcp", p.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer refused.Close()
		if err := refused.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if pkt, err := readPacket(refused); err == nil {
			t.Errorf("a connection after the crash read %q; want it closed", pkt)
		}
		p.Recover()
		c, _ = fakeClient(t, p.Addr)
		if ans, err := roundTrip(c, "COMMIT"); err != nil || ans[4] != 0 {
			t.Errorf("a COMMIT after Recover: %q, %v; want an OK", ans, err)
		}
	})
}

// TestProxyDropsACompressingClient: a client asking for compression, whose
// frames the proxy cannot read, is dropped rather than misread.
func TestProxyDropsACompressingClient(t *testing.T) {
	f := newFakeServer(t)
	p := NewProxy(t, &Server{Addr: f.addr})
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := readPacket(c); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(packet(1, []byte{clientCompress, 0x02, 0, 0, 'r', 'o', 'o', 't', 0})); err != nil {
		t.Fatal(err)
	}
	if pkt, err := readPacket(c); err == nil {
		t.Errorf("a client asking for compression read %q; want the connection dropped", pkt)
	}
}
