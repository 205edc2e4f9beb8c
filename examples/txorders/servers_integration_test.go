//go:build integration

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The servers the integration tests run the program against, started
// here with os/exec: the repository's own launchers are internal to its
// module, and this example is a module of its own, as a user's program is.

// serverStart bounds a server's start, polled until it answers.
const serverStart = 60 * time.Second

// freePort is a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startMoto starts moto_server on a free loopback port, stopped when the
// test ends, and returns its URL.
func startMoto(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		t.Fatal("moto_server is not on PATH: `make setup` installs it (pip install 'moto[server]')")
	}
	port := freePort(t)
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	if err := cmd.Start(); err != nil {
		t.Fatalf("start moto_server: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	poll(t, "moto_server", exited, func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/moto-api/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	})
	return url
}

// startPostgres initialises a database cluster in a temporary directory and
// starts postgres on a free loopback port, stopped when the test ends; it
// returns the connection string. initdb and postgres refuse to run as
// root: as root they run as the postgres user.
func startPostgres(t *testing.T) string {
	t.Helper()
	bin := postgresBin(t)
	dir, err := os.MkdirTemp("", "txorders-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, and no postgres user to run PostgreSQL as (initdb refuses root): %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	port := freePort(t)
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "logging_collector=off")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatalf("start postgres: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		// SIGINT is postgres's fast shutdown: its sessions end, it exits.
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	poll(t, "postgres", exited, func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		return conn.Close(ctx)
	})
	return dsn
}

// postgresBin is the directory of initdb and postgres: initdb's on PATH (a
// link resolved), or Debian's /usr/lib/postgresql/<version>/bin.
func postgresBin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		return filepath.Dir(p)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(dirs) == 0 {
		t.Fatal("PostgreSQL's initdb is neither on PATH nor in /usr/lib/postgresql/*/bin: `make setup` installs it (apt-get install postgresql-15)")
	}
	slices.Sort(dirs)
	return filepath.Dir(dirs[len(dirs)-1])
}

// startMariaDB initialises a MariaDB data directory in a temporary
// directory and starts mariadbd on a free loopback port, stopped when the
// test ends, with a database "txorders" whose root has no password; it
// returns the server's host:port (mariaDSN makes the program's DSN of it).
// mariadbd refuses to run as root: as root both run as the mysql user.
func startMariaDB(t *testing.T) string {
	t.Helper()
	installDB, mariadbd := mariadbBins(t)
	dir, err := os.MkdirTemp("", "txorders-maria-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("mysql")
		if err != nil {
			t.Fatalf("running as root, and no mysql user to run MariaDB as (mariadbd refuses root): %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	data := filepath.Join(dir, "data")
	// --no-defaults: the machine's my.cnf (a system server's port, socket
	// and data directory) is not the test's. The root account has no
	// password (normal authentication, not the unix socket's). --tmpdir
	// (passed on to the bootstrapping mariadbd, and given to the server
	// below): a starting mariadbd deletes every #sql* file in its tmpdir,
	// so one starting beside this install in a shared /tmp deleted the
	// install's temporary tables ("Could not remove temporary table",
	// "Unknown table 'mysql.tmp_user_sys'").
	install := exec.Command(installDB, "--no-defaults", "--datadir="+data, "--auth-root-authentication-method=normal",
		"--skip-test-db", "--skip-name-resolve", "--innodb-log-file-size=8M", "--tmpdir="+dir)
	install.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	install.Dir = dir
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	// The server makes the database as it starts, before it says it is
	// ready.
	initFile := filepath.Join(dir, "init.sql")
	if err := os.WriteFile(initFile, []byte("CREATE DATABASE IF NOT EXISTS txorders CHARACTER SET utf8mb4;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Another process may take the free port before mariadbd binds it: a
	// few attempts make that race harmless.
	var failures []string
	for range 3 {
		port := freePort(t)
		cmd := exec.Command(mariadbd, "--no-defaults", "--datadir="+data, "--port="+strconv.Itoa(port), "--bind-address=127.0.0.1",
			"--socket="+filepath.Join(dir, "mysqld.sock"), "--pid-file="+filepath.Join(dir, "mysqld.pid"), "--tmpdir="+dir,
			"--init-file="+initFile, "--skip-name-resolve", "--skip-log-bin", "--performance-schema=OFF",
			"--innodb-flush-log-at-trx-commit=0", "--innodb-doublewrite=0", "--innodb-log-file-size=8M")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Dir = dir
		var log lockedBuffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatalf("start mariadbd: %v", err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		stop := func() {
			// SIGTERM is mariadbd's shutdown: its sessions end, it exits.
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		}
		// mariadbd says it is ready on stderr once its port is bound and
		// the init file has run: unlike a client's poll of the port, that
		// is never another server's answer.
		switch ready, err := waitForLine(&log, "ready for connections", exited); {
		case ready:
			t.Cleanup(stop)
			return fmt.Sprintf("127.0.0.1:%d", port)
		case err == nil:
			stop()
			t.Fatalf("mariadbd on port %d did not start within %s\n%s", port, serverStart, log.String())
		default:
			failures = append(failures, fmt.Sprintf("port %d: exited before it was ready: %v\n%s", port, err, log.String()))
		}
	}
	t.Fatalf("mariadbd did not start:\n%s", strings.Join(failures, "\n"))
	return ""
}

// waitForLine waits for a server's log to contain line (true), for the
// server to exit (false, and how it exited), or for serverStart to pass
// (false, nil).
func waitForLine(log *lockedBuffer, line string, exited <-chan error) (bool, error) {
	deadline := time.After(serverStart)
	for !strings.Contains(log.String(), line) {
		select {
		case err := <-exited:
			if err == nil {
				err = errors.New("exit status 0")
			}
			return false, err
		case <-deadline:
			return false, nil
		case <-time.After(20 * time.Millisecond):
		}
	}
	return true, nil
}

// lockedBuffer is a server's output, written by its exec.Cmd's copying
// goroutine and read by the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// mariaDSN is the program's DSN for the database txorders on the MariaDB
// (or a proxy of it) at addr.
func mariaDSN(addr string) string { return "root@tcp(" + addr + ")/txorders" }

// mariadbBins are mariadb-install-db and mariadbd: on PATH, or where
// Debian's mariadb-server puts them (/usr/bin, /usr/sbin: not on a user's
// PATH).
func mariadbBins(t *testing.T) (installDB, mariadbd string) {
	t.Helper()
	find := func(name, dir string) string {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		if p := filepath.Join(dir, name); fileExists(p) {
			return p
		}
		t.Fatalf("MariaDB's %s is neither on PATH nor in %s: install mariadb-server (apt-get install mariadb-server)", name, dir)
		return ""
	}
	return find("mariadb-install-db", "/usr/bin"), find("mariadbd", "/usr/sbin")
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// poll calls ready until it succeeds, the server exits, or serverStart
// passes.
func poll(t *testing.T, name string, exited <-chan error, ready func(context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(serverStart)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := ready(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case werr := <-exited:
			t.Fatalf("%s exited before it answered: %v", name, errors.Join(werr, err))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer within %s: %v", name, serverStart, err)
		}
	}
}
