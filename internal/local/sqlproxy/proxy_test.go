package sqlproxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// lines is a toy protocol: each message is a line; the server greets with
// "HELLO", which the proxy rewrites to "HELLO via proxy"; the client's
// first line "COMPRESS" is refused; a client's "COMMIT" is a COMMIT, and
// a server's line starting "OK" or "ERR" ends an answer.
type lines struct{}

func readLine(r io.Reader) ([]byte, error) {
	var b []byte
	one := make([]byte, 1)
	for range 1 << 16 {
		if _, err := io.ReadFull(r, one); err != nil {
			return nil, err
		}
		b = append(b, one[0])
		if one[0] == '\n' {
			return b, nil
		}
	}
	return nil, errors.New("a line too long")
}

func (lines) FromClient(r io.Reader, first bool) ([]byte, error) {
	msg, err := readLine(r)
	if err == nil && first && string(msg) == "COMPRESS\n" {
		return nil, errors.New("compression refused")
	}
	return msg, err
}

func (lines) FromServer(r io.Reader, first bool) ([]byte, error) {
	msg, err := readLine(r)
	if err == nil && first && string(msg) == "HELLO\n" {
		msg = []byte("HELLO via proxy\n")
	}
	return msg, err
}

func (lines) IsCommit(msg []byte) bool { return string(msg) == "COMMIT\n" }

func (lines) EndsAnswer(msg []byte) bool {
	return bytes.HasPrefix(msg, []byte("OK")) || bytes.HasPrefix(msg, []byte("ERR"))
}

// upstream greets each connection with HELLO and answers each line with
// a NOTICE then OK: an answer of two messages, of which the proxy must
// swallow both. It sends each COMMIT it receives on commits and one value
// on ends as a connection ends. With hold not nil, it answers a COMMIT
// only once hold is closed.
type upstream struct {
	addr          string
	commits, ends chan struct{}
	hold          chan struct{}
}

// startUpstream listens on a loopback port until t ends.
func startUpstream(t *testing.T, hold chan struct{}) *upstream {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	u := &upstream{addr: l.Addr().String(), commits: make(chan struct{}, 8), ends: make(chan struct{}, 8), hold: hold}
	go u.accept(l)
	return u
}

func (u *upstream) accept(l net.Listener) {
	for c, err := l.Accept(); err == nil; c, err = l.Accept() {
		go u.session(c)
	}
}

func (u *upstream) session(c net.Conn) {
	defer func() { u.ends <- struct{}{} }()
	defer c.Close()
	sc := bufio.NewScanner(c)
	for line := "HELLO"; ; line = "NOTICE " + sc.Text() + "\nOK" {
		if _, err := io.WriteString(c, line+"\n"); err != nil || !sc.Scan() {
			return
		}
		if sc.Text() == "COMMIT" {
			u.commits <- struct{}{}
			if u.hold != nil {
				<-u.hold
			}
		}
	}
}

// waitEnd waits, bounded, for a connection to the server to end.
func (u *upstream) waitEnd(t *testing.T) {
	t.Helper()
	select {
	case <-u.ends:
	case <-time.After(10 * time.Second):
		t.Fatal("the server's connection did not end within 10 s")
	}
}

// client is a connection through the proxy that has read the greeting.
type client struct {
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) (*client, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	cl := &client{c: c, r: bufio.NewReader(c)}
	greeting, err := cl.r.ReadString('\n')
	if err != nil {
		t.Fatalf("read the greeting through the proxy: %v", err)
	}
	return cl, greeting
}

// roundTrip sends a line and reads its answer, up to the OK.
func (cl *client) roundTrip(line string) (string, error) {
	if _, err := io.WriteString(cl.c, line+"\n"); err != nil {
		return "", err
	}
	var ans strings.Builder
	for range 3 {
		l, err := cl.r.ReadString('\n')
		ans.WriteString(l)
		if err != nil {
			return ans.String(), err
		}
		if l == "OK\n" {
			return ans.String(), nil
		}
	}
	return ans.String(), errors.New("no OK")
}

// TestProxyForwards: with no fault armed, the greeting reaches the client
// as the protocol rewrites it, and every message both ways, a COMMIT too.
func TestProxyForwards(t *testing.T) {
	f := startUpstream(t, nil)
	p := New(t, f.addr, lines{})
	c, g := dial(t, p.Addr)
	if g != "HELLO via proxy\n" {
		t.Errorf("greeting %q through the proxy; want the protocol's rewrite", g)
	}
	for _, line := range []string{"BEGIN", "COMMIT"} {
		if ans, err := c.roundTrip(line); err != nil || ans != "NOTICE "+line+"\nOK\n" {
			t.Fatalf("%s through the proxy: %q, %v", line, ans, err)
		}
	}
	if len(f.commits) != 1 || p.Applied() != 0 {
		t.Errorf("the server saw %d COMMITs, %d faults applied; want 1, 0", len(f.commits), p.Applied())
	}
}

// TestLoseCommitAnswer: the COMMIT reaches the server, and the client
// reads the end of its connection, not the answer, and only once the
// server has answered: a store that then reads the record must find the
// commit applied.
func TestLoseCommitAnswer(t *testing.T) {
	hold := make(chan struct{})
	f := startUpstream(t, hold)
	p := New(t, f.addr, lines{})
	c, _ := dial(t, p.Addr)
	p.Arm(LoseCommitAnswer)
	if _, err := c.roundTrip("BEGIN"); err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		ans, err := c.roundTrip("COMMIT")
		if ans != "" || err == nil {
			read <- errors.New("the client read " + ans + " after its COMMIT; want nothing, the connection lost")
			return
		}
		read <- nil
	}()
	// While the server holds its answer the client's read stays blocked:
	// a window, not a sleep the test relies on to pass (the proxy never
	// ends it early; a proxy that does fails).
	<-f.commits
	select {
	case err := <-read:
		t.Fatalf("the client's read ended (%v) before the server answered the COMMIT", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(hold)
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	f.waitEnd(t)
	if p.Applied() != 1 {
		t.Errorf("%d faults applied; want 1", p.Applied())
	}
	// The proxy still serves: the fault was one COMMIT's.
	c, _ = dial(t, p.Addr)
	if _, err := c.roundTrip("COMMIT"); err != nil {
		t.Errorf("a COMMIT after the fault: %v", err)
	}
}

// TestDropBeforeCommit: the server's connection ends without the COMMIT.
func TestDropBeforeCommit(t *testing.T) {
	f := startUpstream(t, nil)
	p := New(t, f.addr, lines{})
	c, _ := dial(t, p.Addr)
	p.Arm(DropBeforeCommit)
	if ans, err := c.roundTrip("COMMIT"); err == nil {
		t.Fatalf("the client read %q after its COMMIT; want the connection lost", ans)
	}
	f.waitEnd(t)
	if len(f.commits) != 0 || p.Applied() != 1 {
		t.Errorf("the server saw %d COMMITs, %d faults applied; want 0, 1", len(f.commits), p.Applied())
	}
}

// TestFaultsApplyInOrder: each Arm is one COMMIT's fault, in order, on
// any connection; other messages take none.
func TestFaultsApplyInOrder(t *testing.T) {
	f := startUpstream(t, nil)
	p := New(t, f.addr, lines{})
	p.Arm(DropBeforeCommit)
	p.Arm(LoseCommitAnswer)
	for i, wantCommits := range []int{0, 1} {
		c, _ := dial(t, p.Addr)
		if _, err := c.roundTrip("SELECT"); err != nil {
			t.Fatalf("a SELECT with faults armed: %v", err)
		}
		if _, err := c.roundTrip("COMMIT"); err == nil {
			t.Fatalf("COMMIT %d was answered; want its fault", i+1)
		}
		f.waitEnd(t)
		if len(f.commits) != wantCommits {
			t.Errorf("after COMMIT %d the server saw %d COMMITs; want %d", i+1, len(f.commits), wantCommits)
		}
	}
	if p.Applied() != 2 {
		t.Errorf("%d faults applied; want 2", p.Applied())
	}
}

// TestCrashAndRecover: LoseCommitAnswerAndCrash loses the answer, then
// the proxy drops every connection and refuses new ones until Recover.
func TestCrashAndRecover(t *testing.T) {
	f := startUpstream(t, nil)
	p := New(t, f.addr, lines{})
	other, _ := dial(t, p.Addr)
	c, _ := dial(t, p.Addr)
	p.Arm(LoseCommitAnswerAndCrash)
	if ans, err := c.roundTrip("COMMIT"); err == nil {
		t.Fatalf("the client read %q after its COMMIT; want the connection lost", ans)
	}
	f.waitEnd(t)
	if len(f.commits) != 1 {
		t.Errorf("the server saw %d COMMITs; want 1", len(f.commits))
	}
	if ans, err := other.roundTrip("SELECT"); err == nil {
		t.Errorf("another connection read %q after the crash; want it dropped", ans)
	}
	refused, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer refused.Close()
	if err := refused.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if b, err := bufio.NewReader(refused).ReadString('\n'); err == nil {
		t.Errorf("a connection after the crash read %q; want it closed", b)
	}
	p.Recover()
	c, _ = dial(t, p.Addr)
	if _, err := c.roundTrip("COMMIT"); err != nil {
		t.Errorf("a COMMIT after Recover: %v", err)
	}
}

// TestRefusedFirstMessage: a first message the protocol refuses drops the
// client, and the server's connection with it.
func TestRefusedFirstMessage(t *testing.T) {
	f := startUpstream(t, nil)
	p := New(t, f.addr, lines{})
	c, _ := dial(t, p.Addr)
	if ans, err := c.roundTrip("COMPRESS"); err == nil {
		t.Errorf("a refused client read %q; want the connection dropped", ans)
	}
	f.waitEnd(t)
}

// TestCloseEndsConnections: Close drops the open connections and returns
// once its goroutines have; the port refuses afterwards.
func TestCloseEndsConnections(t *testing.T) {
	f := startUpstream(t, nil)
	p := New(t, f.addr, lines{})
	c, _ := dial(t, p.Addr)
	p.Close()
	if ans, err := c.roundTrip("SELECT"); err == nil {
		t.Errorf("a connection read %q after Close; want it dropped", ans)
	}
	f.waitEnd(t)
	if c, err := net.Dial("tcp", p.Addr); err == nil {
		_ = c.Close()
		t.Error("the proxy's port accepts after Close")
	}
}
