//go:build unix

package proc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestExecutable(t *testing.T) {
	dir := t.TempDir()
	prog, data := filepath.Join(dir, "prog"), filepath.Join(dir, "data")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(data, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{prog: true, data: false, dir: false, filepath.Join(dir, "none"): false} {
		if got := Executable(path); got != want {
			t.Errorf("Executable(%s) = %v; want %v", path, got, want)
		}
	}
}

// TestRunAsNamesTheRemedy: a missing user is an error naming the user,
// the programs that need it and the remedy; an existing one is its ids.
func TestRunAsNamesTheRemedy(t *testing.T) {
	_, err := credential("no-such-user-sqsonce", "serverd", "install the server with `apt-get install x`")
	if err == nil || !strings.Contains(err.Error(), "serverd must run as the no-such-user-sqsonce user") || !strings.Contains(err.Error(), "apt-get install x") {
		t.Errorf("credential of a missing user: %v; want the user, the programs and the remedy", err)
	}
	cred, err := credential("root", "serverd", "")
	if err != nil || cred == nil || cred.Uid != 0 || cred.Gid != 0 {
		t.Errorf("credential(root) = %+v, %v; want uid 0, gid 0", cred, err)
	}
}

// TestServerDirIsTheUsers: as root, the directory is the named user's
// and the credential its ids; otherwise no credential (this process's).
func TestServerDirIsTheUsers(t *testing.T) {
	dir, cred, err := ServerDir("proc-test-", "nobody", "serverd", "")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() || !strings.HasPrefix(filepath.Base(dir), "proc-test-") || fi.Mode().Perm() != 0o700 {
		t.Fatalf("ServerDir made %s: %v, %v; want a 0700 directory named proc-test-*", dir, fi, err)
	}
	if os.Geteuid() != 0 {
		if cred != nil {
			t.Errorf("ServerDir not as root returned %+v; want no credential", cred)
		}
		return
	}
	owner := fi.Sys().(*syscall.Stat_t)
	if cred == nil || cred.Uid == 0 || owner.Uid != cred.Uid || owner.Gid != cred.Gid {
		t.Errorf("ServerDir as root: credential %+v, directory owned by %d:%d; want nobody's, owning it", cred, owner.Uid, owner.Gid)
	}
}

func TestRunCarriesTheOutput(t *testing.T) {
	dir := t.TempDir()
	if err := Run(context.Background(), nil, dir, "/bin/sh", "-c", "pwd > where"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "where")); err != nil || strings.TrimSpace(string(b)) != dir {
		t.Errorf("Run ran in %q, %v; want %s", b, err, dir)
	}
	err := Run(context.Background(), nil, dir, "/bin/sh", "-c", "echo no room >&2; exit 3")
	if err == nil || !strings.Contains(err.Error(), "sh: exit status 3: no room") {
		t.Errorf("Run of a failing program: %v; want its name, status and output", err)
	}
}

func TestStartServerWaitsForReady(t *testing.T) {
	p, log, err := StartServer(context.Background(), Server{Path: "/bin/sh",
		Args:  []string{"-c", "echo starting; echo ready now >&2; exec sleep 60"},
		Ready: "ready now", Within: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(0)
	if got := log.String(); got != "starting\nready now" {
		t.Errorf("log %q", got)
	}
}

func TestStartServerFailsWithTheLog(t *testing.T) {
	_, _, err := StartServer(context.Background(), Server{Path: "/bin/sh",
		Args: []string{"-c", "echo port taken"}, Ready: "ready", Within: 10 * time.Second})
	if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "port taken") {
		t.Errorf("a server that exits: %v; want ErrExited with its output", err)
	}
	_, _, err = StartServer(context.Background(), Server{Path: "/bin/sh",
		Args: []string{"-c", "echo slow; exec sleep 60"}, Ready: "ready", Within: 100 * time.Millisecond})
	if err == nil || errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "did not become ready: slow") {
		t.Errorf("a server never ready: %v; want not ready, with its output", err)
	}
}

func TestTryPortsRetries(t *testing.T) {
	var ports []int
	err := TryPorts(context.Background(), func(port int) error {
		ports = append(ports, port)
		if len(ports) < 3 {
			return ErrExited
		}
		return nil
	})
	if err != nil || len(ports) != 3 {
		t.Errorf("TryPorts: %v after %d attempts; want success on the third", err, len(ports))
	}
	ports = nil
	err = TryPorts(context.Background(), func(port int) error { ports = append(ports, port); return ErrExited })
	if !errors.Is(err, ErrExited) || len(ports) != 3 {
		t.Errorf("TryPorts of a launch that always fails: %v after %d attempts; want its error after 3", err, len(ports))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ports = nil
	_ = TryPorts(ctx, func(port int) error { ports = append(ports, port); return ErrExited })
	if len(ports) != 1 {
		t.Errorf("TryPorts with its context ended tried %d times; want 1", len(ports))
	}
}
