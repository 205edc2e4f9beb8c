//go:build unix

package proc

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
)

// ServerDir makes a new temporary directory for a server, named as
// os.MkdirTemp's pattern, and returns it with the credential to run the
// server's programs with: the system user name's when this process is
// root (PostgreSQL and MariaDB refuse root), who then owns the directory,
// nil otherwise. programs names them and remedy says how to get the user,
// for the error when it does not exist.
func ServerDir(pattern, name, programs, remedy string) (string, *syscall.Credential, error) {
	cred, err := runAs(name, programs, remedy)
	if err != nil {
		return "", nil, err
	}
	dir, err := tempDir(pattern, cred)
	return dir, cred, err
}

// runAs is name's credential when this process is root, nil otherwise.
func runAs(name, programs, remedy string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	return credential(name, programs, remedy)
}

// credential is the user name's, or an error saying why it is needed and
// remedy.
func credential(name, programs, remedy string) (*syscall.Credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("running as root, %s must run as the %s user, which does not exist (%w): %s", programs, name, err, remedy)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("the %s user's ids: %w", name, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// tempDir makes a new temporary directory, named as os.MkdirTemp's
// pattern, and gives it to cred's user when cred is not nil: the server
// writes its data there as that user, and it stays 0700, the server's
// alone (and root's).
func tempDir(pattern string, cred *syscall.Credential) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			_ = os.RemoveAll(dir)
			return "", fmt.Errorf("give %s to uid %d: %w", dir, cred.Uid, err)
		}
	}
	return dir, nil
}

// Run runs the program at path with args in dir as cred (nil: as this
// process) to its end, within ctx: a step before the server starts
// (initdb, mariadb-install-db). Its error carries the program's output.
func Run(ctx context.Context, cred *syscall.Credential, dir, path string, args ...string) error {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", filepath.Base(path), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Server is how StartServer starts a server.
type Server struct {
	// Path and Args are the program and its arguments; Dir its working
	// directory; Cred the user it runs as (nil: as this process).
	Path string
	Args []string
	Dir  string
	Cred *syscall.Credential
	// Ready is what the server writes to its output (either stream) once
	// it accepts connections on its port: unlike a poll of the port, never
	// another server's answer. Within bounds the wait.
	Ready  string
	Within time.Duration
}

// StartServer starts s and returns, with the tail of its output, once it
// has written s.Ready. It fails with ErrExited when the server exits
// first (most often: another process took its port), and stops it when
// s.Within or ctx ends first. Each error carries the output's tail.
func StartServer(ctx context.Context, s Server) (*Process, *Tail, error) {
	cmd := exec.Command(s.Path, s.Args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.Cred}
	cmd.Dir = s.Dir
	log := NewTail(8192)
	cmd.Stdout = log
	cmd.Stderr = log
	p, err := Start(ctx, cmd, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	// The server writes its readiness to a log it may buffer, not line by
	// line to a pipe: a bounded poll of the tail reads it.
	deadline := time.Now().Add(s.Within)
	for {
		select {
		case <-p.Exited():
			return nil, nil, fmt.Errorf("%w: %s", ErrExited, log)
		default:
		}
		if strings.Contains(log.String(), s.Ready) {
			return p, log, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.Stop(0)
			return nil, nil, fmt.Errorf("did not become ready: %s", log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TryPorts calls launch with a free loopback port until it succeeds, up
// to three times: another process may take the port between FreePort and
// the server's bind, and a few attempts make that race harmless. It
// returns launch's last error, or ctx's end.
func TryPorts(ctx context.Context, launch func(port int) error) error {
	var lastErr error
	for range 3 {
		port, err := FreePort()
		if err != nil {
			return err
		}
		if lastErr = launch(port); lastErr == nil {
			return nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return lastErr
}
