package redisserver

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/internal/local/proc"
)

// InstallCommand installs redis-server on Debian and Ubuntu.
const InstallCommand = "apt-get update && apt-get install -y redis-server"

// Binaries are the servers the tests know, by command name.
var Binaries = []string{"redis-server", "valkey-server"}

// Binary returns the path of the named server (redis-server or
// valkey-server), or an error that says how to install redis-server.
func Binary(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s is not on PATH: install it (as root) with `%s`, or run `make setup`", name, InstallCommand)
	}
	return path, nil
}

// Server is a running server bound to the loopback interface.
type Server struct {
	// Addr is host:port, for redis.Options.Addr.
	Addr string
	// Bin is the server's executable.
	Bin string

	t    testing.TB
	port int
	mu   sync.Mutex
	proc *proc.Process
	log  *proc.Tail
}

// Start launches redis-server for t and stops it when t ends. A missing
// redis-server fails t with the install command.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartBinary(t, "redis-server")
}

// StartBinary launches the named server (see Binaries) for t.
func StartBinary(t testing.TB, name string) *Server {
	t.Helper()
	bin, err := Binary(name)
	if err != nil {
		t.Fatal(err)
	}
	var lastErr error
	// Another process may take the free port between the probe and the
	// server's bind (redis-server's --port 0 means no TCP at all); a few
	// attempts make that race harmless.
	for range 3 {
		port, err := proc.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), Bin: bin, t: t, port: port}
		if lastErr = s.launch(); lastErr == nil {
			t.Cleanup(s.Stop)
			return s
		}
	}
	t.Fatalf("start %s: %v", name, lastErr)
	return nil
}

func (s *Server) launch() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// No persistence: nothing on disk, nothing to clean up, and a restart
	// comes back empty. The working directory is the test's temporary one
	// in case the server writes anything anyway.
	cmd := exec.Command(s.Bin, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.t.TempDir(), "--logfile", "",
		"--protected-mode", "yes", "--daemonize", "no")
	log := proc.NewTail(4096)
	cmd.Stderr = log
	pr, err := proc.Start(ctx, cmd, func(line string) bool {
		return strings.Contains(line, "Ready to accept connections")
	}, log)
	if err != nil {
		return fmt.Errorf("%s on %s: %w: %s", s.Bin, s.Addr, err, log)
	}
	s.mu.Lock()
	s.proc, s.log = pr, log
	s.mu.Unlock()
	return nil
}

// Stop kills the server (its process, by PID) and waits for it to exit. A
// stopped server stays stopped; Stop again does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	pr := s.proc
	s.proc = nil
	s.mu.Unlock()
	if pr != nil {
		pr.Stop(0)
	}
}

// Restart kills the server and starts it again on the same port, empty:
// what a server without persistence is after a crash or a reboot.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	var err error
	// The port was ours a moment ago; it is free again once the process
	// is reaped, but give the kernel a few tries.
	for range 20 {
		if err = s.launch(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("restart %s on %s: %v", s.Bin, s.Addr, err)
}

// Log is the tail of the server's output, for a failure's message.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}
