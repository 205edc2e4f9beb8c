package lambdaruntime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"
)

// maxOutput bounds what a Process keeps of its output: enough for a test's
// failure message, never a test's memory.
const maxOutput = 1 << 20

// Process is a Lambda binary running against a Server, started by
// StartProcess. Only Kill stops it.
type Process struct {
	srv    *Server
	cmd    *exec.Cmd
	out    *boundedBuffer
	exited chan struct{} // closed when the process has exited
	state  error         // cmd.Wait's result, set before exited closes
}

// StartProcess runs the binary bin as the function of s: its environment is
// env and AWS_LAMBDA_RUNTIME_API, nothing inherited, as in a Lambda sandbox
// where the function sees only what its configuration and Lambda set. Its
// stdout and stderr (where Lambda takes its logs from) are kept for Output.
func (s *Server) StartProcess(bin string, env []string) (*Process, error) {
	cmd := exec.Command(bin)
	cmd.Env = append([]string{"AWS_LAMBDA_RUNTIME_API=" + s.Addr()}, env...)
	out := &boundedBuffer{}
	cmd.Stdout = out
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("lambdaruntime: start %s: %w", bin, err)
	}
	p := &Process{srv: s, cmd: cmd, out: out, exited: make(chan struct{})}
	go func() {
		p.state = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Invoke is Server.Invoke that gives up when the process exits: a function
// whose init failed, or that crashed, never answers.
func (p *Process) Invoke(ctx context.Context, event []byte, timeout time.Duration) (Result, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-p.exited:
			cancel(fmt.Errorf("lambdaruntime: the function's process exited (%v)", p.state))
		case <-ctx.Done():
		}
	}()
	return p.srv.Invoke(ctx, event, timeout)
}

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Wait waits for the process to exit, at most until ctx ends, and returns
// how it ended (an *exec.ExitError for a non-zero status).
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.exited:
		return p.state
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// State is how the process ended, with its resource usage
// (ProcessState.SysUsage); nil until it has exited.
func (p *Process) State() *os.ProcessState {
	select {
	case <-p.exited:
		return p.cmd.ProcessState
	default:
		return nil
	}
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Output is what the process has written to stdout and stderr: so far
// while it runs (a line just written may still be in the pipe), all of it
// once it has exited (Exited, Wait or Kill).
func (p *Process) Output() string { return p.out.String() }

// Kill stops the process, this one only (by its pid), and waits for it. A
// process that has exited already is not an error.
func (p *Process) Kill() error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("lambdaruntime: kill pid %d: %w", p.Pid(), err)
	}
	<-p.exited
	return nil
}

// boundedBuffer keeps the first maxOutput bytes written to it; it is written
// by the process's output copiers and read by tests.
type boundedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := maxOutput - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *boundedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
