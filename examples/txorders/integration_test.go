//go:build integration

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The program, built as a user builds theirs, run as a subprocess against
// moto_server, PostgreSQL and MariaDB: killed with SIGKILL after its handler
// returned and before its commit was answered, and paused (SIGSTOP) past
// its lock while a second run takes the order over. The next run must leave
// exactly one order row. The same runs with -plain (the row written outside
// the transaction) leave two: the difference the transaction makes.

// program is the program binary, built once by TestMain.
var program string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "txorders-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	program = filepath.Join(dir, "txorders")
	// In the repository's workspace (go.work), which gives the example this
	// checkout's sqs-once modules.
	build := exec.Command("go", "build", "-o", program, ".")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const (
	// lockTimeout is the runs' lock: short, so that a retry takes over a
	// dead or paused holder's order within seconds.
	lockTimeout = "2s"
	// retryWait is how long a retry waits for that (-wait): it goes on as
	// soon as the lock has expired, and fails the test if it never does.
	retryWait = "60s"
	// runLimit bounds every run of the program.
	runLimit = 2 * time.Minute
)

// target is one server the program runs against, directly or through a
// proxy.
type target struct {
	// env and args point the program at the server at addr (a URL for
	// DynamoDB, host:port for PostgreSQL and MySQL).
	env  func(addr string) []string
	args func(addr string) []string
	addr string
	// proxy starts a commitProxy in front of addr: the commit held, or
	// applied and its answer lost; plain picks the plain store's
	// completion as the commit.
	proxy func(t *testing.T, plain, lose bool) *commitProxy
}

func dynamoTarget(t *testing.T) target {
	url := startMoto(t)
	awsEnv := func(endpoint string) []string {
		dir := t.TempDir()
		return []string{
			"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing",
			"AWS_EC2_METADATA_DISABLED=true", "AWS_ENDPOINT_URL=" + endpoint,
			"AWS_CONFIG_FILE=" + filepath.Join(dir, "none"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "none"),
		}
	}
	return target{
		addr: url, env: awsEnv,
		args: func(string) []string { return []string{"-store", "dynamodb"} },
		proxy: func(t *testing.T, plain, lose bool) *commitProxy {
			trigger := dynamoTrigger(transactWrite)
			if plain {
				trigger = completionUpdate
			}
			action := holdRequest
			if lose {
				action = loseAnswer
			}
			return startDynamoProxy(t, url, trigger, action)
		},
	}
}

func postgresTarget(t *testing.T) target {
	dsn := startPostgres(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return target{
		addr: u.Host,
		env:  func(string) []string { return nil },
		args: func(addr string) []string {
			v := *u
			v.Host = addr
			return []string{"-store", "postgres", "-database", v.String()}
		},
		proxy: func(t *testing.T, plain, lose bool) *commitProxy {
			trigger := wireTrigger(pgCommit)
			if plain {
				trigger = pgCompletion
			}
			return startWireProxy(t, u.Host, pgFrontend, trigger, lose)
		},
	}
}

// mysqlTarget is MariaDB, which the program reaches with -store mysql and
// a go-sql-driver DSN.
func mysqlTarget(t *testing.T) target {
	addr := startMariaDB(t)
	return target{
		addr: addr,
		env:  func(string) []string { return nil },
		args: func(addr string) []string {
			return []string{"-store", "mysql", "-database", mariaDSN(addr)}
		},
		proxy: func(t *testing.T, plain, lose bool) *commitProxy {
			trigger := wireTrigger(mysqlCommit)
			if plain {
				trigger = mysqlCompletion
			}
			return startWireProxy(t, addr, mysqlClient, trigger, lose)
		},
	}
}

func TestExactlyOneOrderRow(t *testing.T) {
	t.Parallel()
	for _, store := range []struct {
		name  string
		start func(*testing.T) target
	}{{"dynamodb", dynamoTarget}, {"postgres", postgresTarget}, {"mysql", mysqlTarget}} {
		t.Run(store.name, func(t *testing.T) {
			t.Parallel()
			tg := store.start(t)
			if code, out := runToEnd(t, tg, tg.addr, "-setup"); code != exitOK {
				t.Fatalf("-setup: exit %d\n%s", code, out)
			}
			for _, c := range []struct {
				name        string
				plain, lose bool
				want        int
			}{
				{"killed before its commit applied", false, false, 1},
				{"killed after its commit applied, the answer lost", false, true, 1},
				{"plain, killed before its completion applied", true, false, 2},
			} {
				t.Run(c.name, func(t *testing.T) {
					order := orderID(t)
					killedAtCommit(t, tg, order, c.plain, c.lose)
					if n := rows(t, tg, order); n != c.want {
						t.Errorf("%d order rows after the retry, want %d", n, c.want)
					}
				})
			}
			for _, c := range []struct {
				name  string
				plain bool
				want  int
			}{
				{"paused past its lock", false, 1},
				{"plain, paused past its lock", true, 2},
			} {
				t.Run(c.name, func(t *testing.T) {
					order := orderID(t)
					pausedPastLock(t, tg, order, c.plain)
					if n := rows(t, tg, order); n != c.want {
						t.Errorf("%d order rows, want %d", n, c.want)
					}
				})
			}
			t.Run("a receipt under a nested Do on a store without transactions", func(t *testing.T) {
				nestedReceipt(t, tg, store.name)
			})
			t.Run("a write after the handler returned", func(t *testing.T) {
				order := orderID(t)
				code, out := runToEnd(t, tg, tg.addr, "-order", order, "-amount", "1250", "-leak")
				if code != exitOK || !strings.Contains(out, "recorded by run") {
					t.Fatalf("exit %d, want %d and the order recorded\n%s", code, exitOK, out)
				}
				if !strings.Contains(out, "late write refused:") || !strings.Contains(out, "transaction has ended") {
					t.Errorf("the goroutine's write after the handler returned was not refused with the transaction ended; a nil error drops it silently\n%s", out)
				}
				if n := rows(t, tg, order); n != 1 {
					t.Errorf("%d order rows, want 1 (the handler's; the late write refused)", n)
				}
			})
		})
	}
}

// nestedReceipt runs a handler that writes its order row, then a receipt
// under a nested Do whose store has no transactions, then fails (a later
// step). The receipt's transactional write must be refused (it would join
// the order's transaction, whose rollback drops it after the receipt's key
// completed: an effect lost for good); so nothing commits, and neither key
// is completed.
func nestedReceipt(t *testing.T, tg target, storeName string) {
	t.Helper()
	order := orderID(t)
	code, out := runToEnd(t, tg, tg.addr, "-order", order, "-amount", "1250", "-receipt", "-fail")
	if code != exitFailed {
		t.Fatalf("exit %d, want %d (not recorded)\n%s", code, exitFailed, out)
	}
	refusal := map[string]string{
		"dynamodb": "dynamostore.Add: no transaction in the context",
		"postgres": "pgstore: the context carries no transaction",
		"mysql":    "mysqlstore: the context carries no transaction",
	}[storeName]
	if !strings.Contains(out, refusal) {
		t.Errorf("the nested work's transactional write was not refused with %q\n%s", refusal, out)
	}
	if n := rows(t, tg, order); n != 0 {
		t.Errorf("%d order rows, want 0 (the handler failed)", n)
	}
	if n := rows(t, tg, order+"/receipt"); n != 0 {
		t.Errorf("%d receipt rows, want 0", n)
	}
	code, status := runToEnd(t, tg, tg.addr, "-order", order, "-status")
	if code != exitOK {
		t.Fatalf("-status: exit %d\n%s", code, status)
	}
	if strings.Contains(status, "COMPLETED") {
		t.Errorf("a key is completed whose write was not committed (a lost effect: the key never runs again):\n%s", status)
	}
}

// killedAtCommit runs the program through a proxy that acts on its commit
// (held, or applied with its answer lost), kills it there with SIGKILL,
// then runs the retry, which must succeed: it writes the row, or finds
// the order recorded.
func killedAtCommit(t *testing.T, tg target, order string, plain, lose bool, extra ...string) {
	t.Helper()
	killedAt(t, tg, tg.proxy(t, plain, lose), order, slices.Concat(extra, []string{flagIf(plain, "-plain")})...)
}

// killedAt runs the program with extra through proxy, kills it with
// SIGKILL once the proxy has acted, then runs the retry (the same
// arguments, without the proxy), which must succeed; it returns the
// retry's output.
func killedAt(t *testing.T, tg target, proxy *commitProxy, order string, extra ...string) string {
	t.Helper()
	args := killAt(t, tg, proxy, order, extra...)
	return retry(t, tg, args)
}

// killAt runs the program with extra through proxy and kills it with
// SIGKILL once the proxy has acted; it returns the run's arguments.
func killAt(t *testing.T, tg target, proxy *commitProxy, order string, extra ...string) []string {
	t.Helper()
	args := slices.Concat([]string{"-order", order, "-amount", "1250", "-lock-timeout", lockTimeout}, extra)
	first := startRun(t, tg, proxy.addr, args...)
	select {
	case <-proxy.hit:
	case <-first.done:
		t.Fatalf("the first run ended before the proxy acted on its request: exit %d\n%s", first.code, first.output())
	case <-time.After(runLimit):
		t.Fatalf("the proxy did not act within %s\n%s", runLimit, first.output())
	}
	first.kill(t)
	return args
}

// retry runs the program with args, without a proxy, waiting for a dead
// holder's lock to expire: it must succeed. It returns its output.
func retry(t *testing.T, tg target, args []string) string {
	t.Helper()
	code, out := runToEnd(t, tg, tg.addr, slices.Concat(args, []string{"-wait", retryWait})...)
	if code != exitOK {
		t.Fatalf("the retry: exit %d, want %d\n%s", code, exitOK, out)
	}
	t.Logf("the retry: %s", firstLine(out))
	return out
}

// pausedPastLock runs a holder that writes its row and waits (-hold),
// stops it with SIGSTOP, runs a second holder, which waits for the paused
// one's lock to expire and takes the order over, then lets the first go
// on: its lock is lost. In the transaction, that is its commit refused, and
// its exit says so; with -plain its row is written already, and sqsonce
// reports its completion unrecorded (logged) as Do's nil, or, when the
// holder's renewal (overdue since the SIGSTOP) finds the lock lost before
// the handler has read its line, ends the handler with the lock lost: two
// goroutines racing after SIGCONT, the row written either way.
func pausedPastLock(t *testing.T, tg target, order string, plain bool, extra ...string) {
	t.Helper()
	args := slices.Concat([]string{"-order", order, "-amount", "1250", "-lock-timeout", lockTimeout, flagIf(plain, "-plain")}, extra)
	first := startRun(t, tg, tg.addr, slices.Concat(args, []string{"-hold"})...)
	first.waitLine(t, "holding")
	if err := first.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	code, out := runToEnd(t, tg, tg.addr, slices.Concat(args, []string{"-wait", retryWait})...)
	if code != exitOK || !strings.Contains(out, "recorded by run") {
		t.Fatalf("the second holder: exit %d, want %d and the order recorded\n%s", code, exitOK, out)
	}
	if _, err := io.WriteString(first.stdin, "\n"); err != nil {
		t.Fatal(err)
	}
	if err := first.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	want := []int{exitLockLost}
	if plain {
		want = []int{exitOK, exitLockLost}
	}
	if code := first.wait(t); !slices.Contains(want, code) {
		t.Errorf("the paused holder: exit %d, want one of %v\n%s", code, want, first.output())
	}
}

func flagIf(set bool, flag string) string {
	if set {
		return flag
	}
	return ""
}

func orderID(t *testing.T) string {
	return fmt.Sprintf("A-%d-%s", time.Now().UnixNano(), strings.NewReplacer("/", "-", " ", "-", ",", "").Replace(t.Name()))
}

// rows is the number of order's rows, as the program counts them.
func rows(t *testing.T, tg target, order string) int {
	t.Helper()
	code, out := runToEnd(t, tg, tg.addr, "-order", order, "-count")
	n, err := strconv.Atoi(strings.TrimSpace(firstLine(out)))
	if code != exitOK || err != nil {
		t.Fatalf("-count: exit %d, %v\n%s", code, err, out)
	}
	return n
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// progRun is one run of the program.
type progRun struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	done  chan struct{}
	code  int

	mu  sync.Mutex
	out bytes.Buffer // stdout and stderr
}

// startRun starts the program against addr with args ("" left out).
func startRun(t *testing.T, tg target, addr string, args ...string) *progRun {
	t.Helper()
	all := tg.args(addr)
	for _, a := range args {
		if a != "" {
			all = append(all, a)
		}
	}
	cmd := exec.Command(program, all...)
	cmd.Env = append(environ(), tg.env(addr)...)
	r := &progRun{cmd: cmd, lines: make(chan string, 100), done: make(chan struct{})}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = writerFunc(r.write)
	if r.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			_, _ = r.write([]byte(sc.Text() + "\n"))
			select {
			case r.lines <- sc.Text():
			default:
			}
		}
		err := cmd.Wait()
		r.code = cmd.ProcessState.ExitCode()
		if err != nil && r.code == 0 {
			r.code = -1
		}
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			_ = cmd.Process.Kill()
			<-r.done
		}
	})
	return r
}

// environ is the test's environment without AWS settings and without
// DATABASE_URL or MYSQL_DSN: the program gets only those its target gives
// it.
func environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "MYSQL_DSN=") {
			out = append(out, kv)
		}
	}
	return out
}

func (r *progRun) write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.Write(b)
}

func (r *progRun) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// wait returns the exit status, within runLimit.
func (r *progRun) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-r.done:
		return r.code
	case <-time.After(runLimit):
		_ = r.cmd.Process.Kill()
		<-r.done
		t.Fatalf("the program did not end within %s\n%s", runLimit, r.output())
		return 0
	}
}

// kill ends the run with SIGKILL: nothing of it runs on.
func (r *progRun) kill(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-r.done
}

// waitLine waits for a line of stdout.
func (r *progRun) waitLine(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(runLimit)
	for {
		select {
		case line := <-r.lines:
			if line == want {
				return
			}
		case <-r.done:
			t.Fatalf("the program ended (exit %d) before printing %q\n%s", r.code, want, r.output())
		case <-deadline:
			t.Fatalf("no %q within %s\n%s", want, runLimit, r.output())
		}
	}
}

// runToEnd runs the program and returns its exit status and output.
func runToEnd(t *testing.T, tg target, addr string, args ...string) (int, string) {
	t.Helper()
	r := startRun(t, tg, addr, args...)
	code := r.wait(t)
	return code, r.output()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
