package pgserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sqs-once/sqs-once/internal/local/proc"
)

// Package is the Debian and Ubuntu package of the server.
const Package = "postgresql-15"

// InstallCommand installs Package.
const InstallCommand = "apt-get update && apt-get install -y " + Package

// DebianBinDir is where Package puts initdb and postgres: not on PATH.
const DebianBinDir = "/usr/lib/postgresql/15/bin"

// BinDir returns the directory holding initdb and postgres: Debian's
// /usr/lib/postgresql/15/bin, else `pg_config --bindir`, else the
// directory of an initdb on PATH; or an error naming the install command.
func BinDir() (string, error) {
	dirs := []string{DebianBinDir}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	return findBinDir(dirs)
}

// findBinDir is the first of dirs holding both programs.
func findBinDir(dirs []string) (string, error) {
	for _, d := range dirs {
		if proc.Executable(filepath.Join(d, "initdb")) && proc.Executable(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", fmt.Errorf("PostgreSQL's initdb and postgres were not found (looked in %s, pg_config --bindir and PATH): install them (as root) with `%s`, or run `make setup`", strings.Join(dirs, ", "), InstallCommand)
}

// Server is a running PostgreSQL on the loopback interface.
type Server struct {
	// DSN is the connection string of its database "postgres" as the
	// superuser "postgres", for pgxpool.New.
	DSN string
	// Addr is host:port.
	Addr string

	dir  string
	proc *proc.Process
	log  *proc.Tail
}

// Options tune a Start; the zero value is what the tests use.
type Options struct {
	// Config is extra postgres settings (name -> value), passed as -c.
	Config map[string]string
}

// Start makes a data directory under a new temporary directory, runs
// initdb and starts postgres on a free loopback port, and returns once it
// accepts connections. Stop the server with Stop. ctx bounds the start.
func Start(ctx context.Context, opts Options) (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	// initdb and postgres refuse root.
	dir, cred, err := proc.ServerDir("pgserver-", "postgres", "initdb and postgres", "install PostgreSQL with `"+InstallCommand+"`, which creates it")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	data := filepath.Join(dir, "data")
	err = proc.Run(ctx, cred, dir, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--no-sync", "--encoding=UTF8", "--locale=C")
	if err == nil {
		err = proc.TryPorts(ctx, func(port int) error { return s.launch(ctx, bin, cred, data, port, opts) })
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) launch(ctx context.Context, bin string, cred *syscall.Credential, data string, port int, opts Options) error {
	args := []string{"-D", data, "-p", strconv.Itoa(port), "-h", "127.0.0.1",
		"-k", s.dir, // the Unix socket in the temporary directory, not /var/run
		// Speed over durability: the database dies with the test.
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200", "-c", "shared_buffers=32MB",
		"-c", "logging_collector=off", "-c", "log_min_messages=warning",
		"-c", "listen_addresses=127.0.0.1"}
	for k, v := range opts.Config {
		args = append(args, "-c", k+"="+v)
	}
	s.Addr = "127.0.0.1:" + strconv.Itoa(port)
	s.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	// postgres prints its readiness to the log only after the port is
	// bound.
	p, log, err := proc.StartServer(ctx, proc.Server{Path: filepath.Join(bin, "postgres"), Args: args, Dir: s.dir, Cred: cred,
		Ready: "ready to accept connections", Within: 30 * time.Second})
	if err != nil {
		return fmt.Errorf("postgres on %s: %w", s.Addr, err)
	}
	s.proc, s.log = p, log
	return nil
}

// Log is the tail of the server's output, for a failure's message.
func (s *Server) Log() string { return s.log.String() }

// Stop kills the server (its process, by PID: postgres's own children
// follow their postmaster) after a short grace, waits for it, and removes
// its directory. Stop again does nothing.
func (s *Server) Stop() {
	if s.proc != nil {
		// SIGINT is postgres's fast shutdown: its children exit with it.
		s.proc.Stop(5 * time.Second)
		s.proc = nil
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
		s.dir = ""
	}
}

// Dir is the server's temporary directory (its data directory inside),
// removed by Stop.
func (s *Server) Dir() string { return s.dir }
