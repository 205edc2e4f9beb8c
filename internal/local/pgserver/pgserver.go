package pgserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
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
		if executable(filepath.Join(d, "initdb")) && executable(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", fmt.Errorf("PostgreSQL's initdb and postgres were not found (looked in %s, pg_config --bindir and PATH): install them (as root) with `%s`, or run `make setup`", strings.Join(dirs, ", "), InstallCommand)
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
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
	cred, err := runAs()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgserver-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	if err := s.start(ctx, bin, cred, opts); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) start(ctx context.Context, bin string, cred *syscall.Credential, opts Options) error {
	if cred != nil {
		// initdb writes into the directory as the postgres user.
		if err := os.Chown(s.dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("give %s to the postgres user: %w", s.dir, err)
		}
	}
	data := filepath.Join(s.dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--no-sync", "--encoding=UTF8", "--locale=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = s.dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w: %s", err, strings.TrimSpace(string(out)))
	}
	var lastErr error
	// Another process may take the free port between the probe and the
	// server's bind: a few attempts make that race harmless.
	for range 3 {
		port, err := proc.FreePort()
		if err != nil {
			return err
		}
		if lastErr = s.launch(ctx, bin, cred, data, port, opts); lastErr == nil {
			return nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return lastErr
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
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Dir = s.dir
	log := proc.NewTail(8192)
	cmd.Stdout = log
	cmd.Stderr = log
	p, err := proc.Start(ctx, cmd, nil, nil)
	if err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	s.Addr = "127.0.0.1:" + strconv.Itoa(port)
	s.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	// postgres prints its readiness to the log only after the port is
	// bound; a poll of the port, bounded, is what tells it apart from
	// another server on a port taken since.
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-p.Exited():
			return fmt.Errorf("postgres on %s: %w: %s", s.Addr, proc.ErrExited, log)
		default:
		}
		if strings.Contains(log.String(), "ready to accept connections") {
			s.proc, s.log = p, log
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.Stop(0)
			return fmt.Errorf("postgres on %s did not become ready: %s", s.Addr, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runAs is the credential to run initdb and postgres with: the postgres
// user's when this process is root (both refuse root), nil otherwise.
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, initdb and postgres must run as the postgres user, which does not exist (%w): install PostgreSQL with `%s`, which creates it", err, InstallCommand)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("the postgres user's ids: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
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
