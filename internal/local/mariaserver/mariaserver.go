package mariaserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sqs-once/sqs-once/internal/local/proc"
)

// Package is the Debian and Ubuntu package of the server. It brings the
// mariadb client too (mariadb-client-core, a dependency).
const Package = "mariadb-server"

// InstallCommand installs Package.
const InstallCommand = "apt-get update && apt-get install -y " + Package

// DebianServerDir is where Package puts mariadbd: /usr/sbin, which is not on
// an ordinary user's PATH on Debian.
const DebianServerDir = "/usr/sbin"

// Database is the database Start creates, the one Server.DSN names.
const Database = "sqsonce"

// Programs are the paths of MariaDB's programs the package runs.
type Programs struct {
	// Server is mariadbd; InstallDB mariadb-install-db, which makes a data
	// directory; Client the mariadb command-line client.
	Server, InstallDB, Client string
}

// FindPrograms looks for mariadbd, mariadb-install-db and mariadb in
// /usr/sbin, /usr/bin and the directories of PATH, and returns an error
// naming the install command when one is missing.
func FindPrograms() (Programs, error) {
	dirs := append([]string{DebianServerDir, "/usr/bin"}, filepath.SplitList(os.Getenv("PATH"))...)
	return findPrograms(dirs)
}

// findPrograms looks for each program in dirs, in order.
func findPrograms(dirs []string) (Programs, error) {
	var p Programs
	var missing []string
	for _, want := range []struct {
		name string
		path *string
	}{{"mariadbd", &p.Server}, {"mariadb-install-db", &p.InstallDB}, {"mariadb", &p.Client}} {
		for _, d := range dirs {
			if d != "" && proc.Executable(filepath.Join(d, want.name)) {
				*want.path = filepath.Join(d, want.name)
				break
			}
		}
		if *want.path == "" {
			missing = append(missing, want.name)
		}
	}
	if len(missing) > 0 {
		return Programs{}, fmt.Errorf("MariaDB's %s not found (looked in %s): install MariaDB (as root) with `%s`, or run `make setup`", strings.Join(missing, ", "), strings.Join(dirs, ", "), InstallCommand)
	}
	return p, nil
}

// Server is a running MariaDB on the loopback interface.
type Server struct {
	// DSN is the data source name of the database Database as the
	// administrator root (no password), in go-sql-driver/mysql's form and
	// without parameters, which the caller appends ("?parseTime=true"...).
	DSN string
	// Addr is host:port.
	Addr string

	progs Programs
	dir   string
	proc  *proc.Process
	log   *proc.Tail
}

// Options tune a Start; the zero value is what the tests use.
type Options struct {
	// Config is extra mariadbd settings (name -> value), passed as
	// --name=value after the package's own, which they override.
	Config map[string]string
}

// Start makes a data directory under a new temporary directory with
// mariadb-install-db, starts mariadbd on a free loopback port, and returns
// once it accepts connections, with the database Database made. Stop the
// server with Stop. ctx bounds the start.
func Start(ctx context.Context, opts Options) (*Server, error) {
	progs, err := FindPrograms()
	if err != nil {
		return nil, err
	}
	// mariadbd refuses root.
	dir, cred, err := proc.ServerDir("mariaserver-", "mysql", "mariadbd", "install MariaDB with `"+InstallCommand+"`, which creates it")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, progs: progs}
	if err := s.start(ctx, cred, opts); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) start(ctx context.Context, cred *syscall.Credential, opts Options) error {
	data := filepath.Join(s.dir, "data")
	// --no-defaults: none of the system's my.cnf (its socket and pid file
	// in /run/mysqld, a system server's). Root may log in over TCP from
	// 127.0.0.1 with no password (normal authentication, not unix_socket).
	// --tmpdir: the bootstrap server deletes every #sql* file in its
	// temporary directory as it starts, so in the shared /tmp it would
	// delete another server's install files mid-way (that install then
	// fails: "Unknown table 'mysql.tmp_user_sys'").
	if err := proc.Run(ctx, cred, s.dir, s.progs.InstallDB, "--no-defaults", "--datadir="+data,
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve",
		"--innodb-log-file-size=8M", "--tmpdir="+s.dir); err != nil {
		return err
	}
	// The database is made by the server as it starts, before it accepts
	// connections: no client round trip, and no window where the DSN's
	// database is missing.
	initFile := filepath.Join(s.dir, "init.sql")
	if err := os.WriteFile(initFile, []byte("CREATE DATABASE IF NOT EXISTS "+Database+" CHARACTER SET utf8mb4;\n"), 0o644); err != nil {
		return err
	}
	return proc.TryPorts(ctx, func(port int) error { return s.launch(ctx, cred, data, initFile, port, opts) })
}

func (s *Server) launch(ctx context.Context, cred *syscall.Credential, data, initFile string, port int, opts Options) error {
	settings := []string{
		"--datadir=" + data, "--port=" + strconv.Itoa(port), "--bind-address=127.0.0.1",
		// The socket and pid file in the temporary directory, not
		// /run/mysqld: a system server's, or another test's.
		"--socket=" + filepath.Join(s.dir, "mysqld.sock"), "--pid-file=" + filepath.Join(s.dir, "mysqld.pid"),
		"--tmpdir=" + s.dir,
		"--init-file=" + initFile,
		"--skip-name-resolve", "--performance-schema=OFF", "--skip-log-bin",
		// Speed over durability: the database dies with the test.
		"--innodb-flush-log-at-trx-commit=0", "--innodb-doublewrite=0", "--innodb-log-file-size=8M",
		"--innodb-buffer-pool-size=64M", "--max-connections=300",
		// What Debian's /etc/mysql/mariadb.conf.d/50-server.cnf sets, which
		// --no-defaults leaves out: a server as Debian users have it.
		"--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci",
	}
	for k, v := range opts.Config {
		settings = append(settings, "--"+k+"="+v)
	}
	s.Addr = "127.0.0.1:" + strconv.Itoa(port)
	s.DSN = "root@tcp(" + s.Addr + ")/" + Database
	// mariadbd says it is ready on its error log (stderr) only once the
	// port is bound and the init file has run. --no-defaults must come
	// first.
	p, log, err := proc.StartServer(ctx, proc.Server{Path: s.progs.Server, Args: append([]string{"--no-defaults"}, settings...),
		Dir: s.dir, Cred: cred, Ready: "ready for connections", Within: 60 * time.Second})
	if err != nil {
		return fmt.Errorf("mariadbd on %s: %w", s.Addr, err)
	}
	s.proc, s.log = p, log
	return nil
}

// Exec runs sql (one statement or several, separated by semicolons) as
// root in the database Database with the mariadb client, over TCP, and
// returns its output: tab-separated rows, no column names, trimmed. The
// error carries the client's message (the server's error).
func (s *Server) Exec(ctx context.Context, sql string) (string, error) {
	return Client(ctx, s.progs.Client, s.Addr, "root", "", sql)
}

// Client runs sql with the mariadb client at path on addr as user (with
// password, when not empty) in the database Database, as Server.Exec does:
// the tests' way to speak to a server, or through a Proxy, without a Go
// driver. The client does not reconnect: a connection lost is an error.
func Client(ctx context.Context, path, addr, user, password, sql string) (string, error) {
	host, port, ok := strings.Cut(addr, ":")
	if !ok {
		return "", fmt.Errorf("mariadb client: the address %q has no port", addr)
	}
	args := []string{"--no-defaults", "--protocol=TCP", "--host=" + host, "--port=" + port, "--user=" + user,
		"--batch", "--skip-column-names", "--skip-reconnect", "--skip-ssl", "--connect-timeout=10",
		"--database=" + Database, "--execute=" + sql}
	cmd := exec.CommandContext(ctx, path, args...)
	if password != "" {
		// The environment, not the command line, which ps shows.
		cmd.Env = append(os.Environ(), "MYSQL_PWD="+password)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("mariadb -e %q on %s as %s: %w: %s", sql, addr, user, err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// userName is what CreateUser accepts as a name: nothing to quote.
var userName = regexp.MustCompile(`^[A-Za-z0-9_]{1,32}$`)

// CreateUser makes the user name, with a random password, who may connect
// from any host (the server's loopback, or a Proxy's), grants it grants
// (what follows GRANT, up to TO: "SELECT, INSERT ON sqsonce.*"; empty for
// none but to connect), and returns its DSN, in Server.DSN's form: a test of
// what a store does with missing privileges. grants is SQL, the test's own.
func (s *Server) CreateUser(ctx context.Context, name, grants string) (dsn string, err error) {
	if !userName.MatchString(name) {
		return "", fmt.Errorf("CreateUser: the name %q is not 1 to 32 letters, digits and underscores", name)
	}
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	password := hex.EncodeToString(b)
	sql := fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", name, password)
	if strings.TrimSpace(grants) != "" {
		sql += fmt.Sprintf("; GRANT %s TO '%s'@'%%'", grants, name)
	}
	if _, err := s.Exec(ctx, sql); err != nil {
		return "", fmt.Errorf("CreateUser %s: %w", name, err)
	}
	return name + ":" + password + "@tcp(" + s.Addr + ")/" + Database, nil
}

// ClientPath is the mariadb client's path, for Client.
func (s *Server) ClientPath() string { return s.progs.Client }

// Log is the tail of the server's output, for a failure's message.
func (s *Server) Log() string { return s.log.String() }

// Stop kills the server (its process, by PID, at once: the database dies
// with it, so a clean shutdown would only cost time), waits for it, and
// removes its directory. Stop again does nothing.
func (s *Server) Stop() {
	if s.proc != nil {
		s.proc.Stop(0)
		s.proc = nil
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
		s.dir = ""
	}
}

// Dir is the server's temporary directory (its data directory, socket and
// pid file inside), removed by Stop.
func (s *Server) Dir() string { return s.dir }
