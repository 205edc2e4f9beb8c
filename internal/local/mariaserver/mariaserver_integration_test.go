//go:build integration

package mariaserver_test

import (
	"context"
	"os"
	"os/user"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/internal/local/mariaserver"
)

// The tests speak to the server with the mariadb client, not a driver, so
// that the root module requires no MySQL driver.

// start starts a server stopped when t ends.
func start(t *testing.T) *mariaserver.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := mariaserver.Start(ctx, mariaserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// TestStartAndStop: the server answers as root on its DSN's address, in
// the database sqsonce, with utf8mb4 and InnoDB, listens on loopback only,
// keeps its socket and pid file in its directory, runs as the mysql user
// when the test runs as root; Stop ends its process and removes its
// directory.
func TestStartAndStop(t *testing.T) {
	s := start(t)
	ctx := t.Context()
	dir := s.Dir()
	if !strings.HasPrefix(s.Addr, "127.0.0.1:") {
		t.Errorf("Addr %q; want a loopback address", s.Addr)
	}
	if want := "root@tcp(" + s.Addr + ")/sqsonce"; s.DSN != want {
		t.Errorf("DSN %q; want %q", s.DSN, want)
	}
	out, err := s.Exec(ctx, "SELECT VERSION(), DATABASE(), @@character_set_database, @@default_storage_engine, @@bind_address, @@socket, @@pid_file, @@performance_schema")
	if err != nil {
		t.Fatalf("query: %v (log: %s)", err, s.Log())
	}
	f := strings.Split(out, "\t")
	if len(f) != 8 {
		t.Fatalf("query answered %q; want 8 columns", out)
	}
	if !strings.HasPrefix(f[0], "10.11.") || !strings.Contains(f[0], "MariaDB") {
		t.Errorf("version %q; want MariaDB 10.11", f[0])
	}
	if f[1] != "sqsonce" || f[2] != "utf8mb4" || f[3] != "InnoDB" || f[4] != "127.0.0.1" {
		t.Errorf("database %q, charset %q, engine %q, bind address %q; want sqsonce, utf8mb4, InnoDB, 127.0.0.1", f[1], f[2], f[3], f[4])
	}
	if !strings.HasPrefix(f[5], dir+"/") || !strings.HasPrefix(f[6], dir+"/") {
		t.Errorf("socket %q, pid file %q; want both in %s", f[5], f[6], dir)
	}
	if f[7] != "0" {
		t.Errorf("performance_schema %q; want off (0)", f[7])
	}
	pidText, err := os.ReadFile(f[6])
	if err != nil {
		t.Fatal(err)
	}
	pid := strings.TrimSpace(string(pidText))
	if os.Geteuid() == 0 {
		status, err := os.ReadFile("/proc/" + pid + "/status")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(status), "\nUid:\t"+mysqlUID(t)+"\t") {
			t.Errorf("mariadbd (pid %s) does not run as the mysql user:\n%s", pid, status)
		}
	}

	s.Stop()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("after Stop the directory %s is still there (%v)", dir, err)
	}
	if _, err := os.Stat("/proc/" + pid); !os.IsNotExist(err) {
		t.Errorf("after Stop mariadbd (pid %s) is still there (%v)", pid, err)
	}
	if out, err := mariaserver.Client(ctx, s.ClientPath(), s.Addr, "root", "", "SELECT 1"); err == nil {
		t.Errorf("after Stop the server still answers on %s (%q)", s.Addr, out)
	}
}

// mysqlUID is the mysql user's id, as /proc shows it.
func mysqlUID(t *testing.T) string {
	t.Helper()
	u, err := user.Lookup("mysql")
	if err != nil {
		t.Fatal(err)
	}
	return u.Uid
}

// TestTwoServersAreApart: two servers run at once, on their own ports and
// directories, and a table made on one is not on the other.
func TestTwoServersAreApart(t *testing.T) {
	a, b := start(t), start(t)
	if a.Addr == b.Addr || a.Dir() == b.Dir() {
		t.Fatalf("two servers share an address (%s, %s) or a directory (%s, %s)", a.Addr, b.Addr, a.Dir(), b.Dir())
	}
	ctx := t.Context()
	if _, err := a.Exec(ctx, "CREATE TABLE only_a (k INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if out, err := b.Exec(ctx, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'sqsonce' AND table_name = 'only_a'"); err != nil || out != "0" {
		t.Errorf("the second server has the first's table: %q, %v", out, err)
	}
}

// TestCreateUser: a user made with grants may do what they allow and no
// more; its DSN names it, its password and the database.
func TestCreateUser(t *testing.T) {
	s := start(t)
	ctx := t.Context()
	if _, err := s.Exec(ctx, "CREATE TABLE t (k INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	dsn, err := s.CreateUser(ctx, "reader", "SELECT ON sqsonce.*")
	if err != nil {
		t.Fatal(err)
	}
	user, rest, _ := strings.Cut(dsn, "@")
	name, password, _ := strings.Cut(user, ":")
	if name != "reader" || password == "" || rest != "tcp("+s.Addr+")/sqsonce" {
		t.Fatalf("DSN %q; want reader:PASSWORD@tcp(%s)/sqsonce", dsn, s.Addr)
	}
	if out, err := mariaserver.Client(ctx, s.ClientPath(), s.Addr, name, password, "SELECT COUNT(*) FROM t"); err != nil || out != "0" {
		t.Errorf("reader's SELECT: %q, %v; want 0", out, err)
	}
	if _, err := mariaserver.Client(ctx, s.ClientPath(), s.Addr, name, password, "INSERT INTO t VALUES (1)"); err == nil || !strings.Contains(err.Error(), "INSERT command denied") {
		t.Errorf("reader's INSERT: %v; want it denied", err)
	}
	if _, err := mariaserver.Client(ctx, s.ClientPath(), s.Addr, name, "wrong", "SELECT 1"); err == nil {
		t.Error("reader logged in with a wrong password")
	}
	if _, err := s.CreateUser(ctx, "x'; DROP DATABASE sqsonce; --", ""); err == nil {
		t.Error("CreateUser took a name that needs quoting")
	}
	if _, err := s.CreateUser(ctx, "nothing", ""); err != nil {
		t.Errorf("CreateUser with no grants: %v", err)
	}
}

// TestProxyFaultsOnMariaDB: through the proxy, with the mariadb client, a COMMIT
// whose answer is lost applied (the row is there), one dropped before it
// did not, and after LoseCommitAnswerAndCrash the proxy refuses clients
// until Recover.
func TestProxyFaultsOnMariaDB(t *testing.T) {
	s := start(t)
	ctx := t.Context()
	if _, err := s.Exec(ctx, "CREATE TABLE t (k INT PRIMARY KEY) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	p := mariaserver.NewProxy(t, s)
	if want := "root@tcp(" + p.Addr + ")/sqsonce"; p.DSN != want {
		t.Errorf("proxy DSN %q; want %q", p.DSN, want)
	}
	through := func(sql string) (string, error) {
		return mariaserver.Client(ctx, s.ClientPath(), p.Addr, "root", "", sql)
	}
	count := func(k int) string {
		t.Helper()
		out, err := s.Exec(ctx, "SELECT COUNT(*) FROM t WHERE k = "+strconv.Itoa(k))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	if _, err := through("BEGIN; INSERT INTO t VALUES (1); COMMIT"); err != nil {
		t.Fatalf("a transaction through the proxy: %v", err)
	}
	if count(1) != "1" || p.Applied() != 0 {
		t.Errorf("with no fault: %s rows, %d faults applied; want 1, 0", count(1), p.Applied())
	}

	p.Arm(mariaserver.LoseCommitAnswer)
	if _, err := through("BEGIN; INSERT INTO t VALUES (2); COMMIT"); err == nil || !strings.Contains(err.Error(), "Lost connection") {
		t.Errorf("LoseCommitAnswer: the client said %v; want the connection lost", err)
	}
	if count(2) != "1" || p.Applied() != 1 {
		t.Errorf("LoseCommitAnswer: %s rows, %d faults applied; want 1 (the COMMIT applied), 1", count(2), p.Applied())
	}

	p.Arm(mariaserver.DropBeforeCommit)
	if _, err := through("BEGIN; INSERT INTO t VALUES (3); COMMIT"); err == nil {
		t.Error("DropBeforeCommit: the client succeeded; want the connection lost")
	}
	// The COMMIT never reached the server: the row is never visible,
	// whether or not the server has yet rolled back.
	if count(3) != "0" || p.Applied() != 2 {
		t.Errorf("DropBeforeCommit: %s rows, %d faults applied; want 0 (rolled back), 2", count(3), p.Applied())
	}

	p.Arm(mariaserver.LoseCommitAnswerAndCrash)
	if _, err := through("BEGIN; INSERT INTO t VALUES (4); COMMIT"); err == nil {
		t.Error("LoseCommitAnswerAndCrash: the client succeeded; want the connection lost")
	}
	if count(4) != "1" {
		t.Errorf("LoseCommitAnswerAndCrash: %s rows; want 1", count(4))
	}
	if _, err := through("SELECT 1"); err == nil {
		t.Error("after the crash the proxy let a client in")
	}
	p.Recover()
	if out, err := through("SELECT COUNT(*) FROM t"); err != nil || out != "3" {
		t.Errorf("after Recover: %q, %v; want 3 rows", out, err)
	}
}
