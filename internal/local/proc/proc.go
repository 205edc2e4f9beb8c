package proc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// ErrExited is the error of a Start whose process exited before it said it
// was ready: most often another process took the port between FreePort and
// the server's bind.
var ErrExited = errors.New("exited during start-up (port taken?)")

// FreePort returns a loopback TCP port that was free a moment ago. Another
// process may take it before the server binds it: callers try a few times.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Tail keeps the last bytes written to it, up to its limit: a server's
// output, for the message of a start that failed.
type Tail struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

// NewTail returns a Tail that keeps the last max bytes.
func NewTail(max int) *Tail { return &Tail{max: max} }

// Write keeps p, dropping what falls out of the limit; it never fails.
func (b *Tail) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if extra := b.buf.Len() - b.max; extra > 0 {
		b.buf.Next(extra)
	}
	return len(p), nil
}

// String is what the Tail holds, trimmed; "" for a nil Tail.
func (b *Tail) String() string {
	if b == nil {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(b.buf.String())
}

// Process is a started command, reaped when it exits.
type Process struct {
	cmd      *exec.Cmd
	exited   chan struct{}
	stopOnce sync.Once
}

// Start starts cmd and reaps it when it exits. With ready nil it returns
// at once, and the caller waits for the server its own way (watching
// Exited). Otherwise it reads cmd's standard output line by line, writes
// each line to lines when that is not nil, and returns once ready is true
// for a line: a server that prints where it listens is never mistaken for
// another that answers on the port. It fails with ErrExited when the
// process exits first, and kills it when ctx ends first. On Linux the
// process is also killed when this program exits without stopping it.
func Start(ctx context.Context, cmd *exec.Cmd, ready func(line string) bool, lines io.Writer) (*Process, error) {
	var stdout io.ReadCloser
	if ready != nil {
		var err error
		if stdout, err = cmd.StdoutPipe(); err != nil {
			return nil, err
		}
	}
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, exited: make(chan struct{})}
	if ready == nil {
		go func() {
			_ = cmd.Wait()
			close(p.exited)
		}()
		return p, nil
	}
	said := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		announced := false
		for sc.Scan() {
			line := sc.Text()
			if lines != nil {
				_, _ = io.WriteString(lines, line+"\n")
			}
			if !announced && ready(line) {
				announced = true
				close(said)
			}
		}
		// Drain to the end, so that the server never blocks on a full
		// pipe, then reap the process.
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		close(p.exited)
	}()
	select {
	case <-said:
		return p, nil
	case <-p.exited:
		return nil, ErrExited
	case <-ctx.Done():
		p.Stop(0)
		return nil, fmt.Errorf("did not start: %w", ctx.Err())
	}
}

// Exited is closed once the process has exited and been reaped.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Stop ends the process this Process started, and only that one (by its
// PID), and waits until it is reaped: an interrupt first, then a kill if
// it has not exited within grace; a kill at once when grace is 0. Stop
// again does nothing.
func (p *Process) Stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		if grace > 0 {
			_ = p.cmd.Process.Signal(os.Interrupt)
			select {
			case <-p.exited:
				return
			case <-time.After(grace):
			}
		}
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
}

// module is the product module's path; its go.mod marks the repository's
// root.
const module = "github.com/sqs-once/sqs-once"

// RepoRoot is the repository's root: the nearest directory up from the
// working directory (a test runs in its package's) whose go.mod declares
// the product module. Tests of every module of the repository (the
// product, local/, cmd/sqs-once/) find the tools make setup installed
// there (.tools) through it.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if declares(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory; run inside the repository", module)
		}
		dir = up
	}
}

// declares reports whether the go.mod at path declares the product module.
func declares(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) == 2 && fields[0] == "module" {
			return fields[1] == module
		}
	}
	return false
}

// Executable reports whether path is a file someone may execute: a
// server's program found where its package puts it.
func Executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}
