//go:build integration

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestTryFollowsTheGettingStartedPage runs what docs/getting-started.md
// walks through: `sqs-once-local try` with a Target= and ExistingQueueArn=,
// then, in the environment it prints and with the CLI on the PATH it
// prints, the commands as printed: before the cutover the consumer reads
// the queue itself; preflight passes; after the cutover the printed
// send-message line, run twice, makes the consumer run once for the order
// and the processor count the second copy as a duplicate, the queue left
// empty and the key COMPLETED in inspect; the rollback gives the queue back
// to the consumer. Ctrl-C ends it and its moto_server.
func TestTryFollowsTheGettingStartedPage(t *testing.T) {
	if _, err := exec.LookPath("aws"); err != nil {
		t.Fatal("the AWS CLI (aws) is not on PATH: make setup installs it (awscli in requirements-dev.txt), or pip install awscli")
	}
	bin := t.TempDir()
	local := filepath.Join(bin, "sqs-once-local")
	// Where make cli writes it: beside sqs-once-local, in bin/.
	cli := filepath.Join(bin, "sqs-once")
	for _, args := range [][]string{{"build", "-o", local, "."}, {"-C", filepath.Join("..", "..", "..", "cmd", "sqs-once"), "build", "-o", cli, "."}} {
		// A compile is bounded by go test's -timeout alone: from a cold
		// cache on a loaded machine it takes minutes.
		if out, err := exec.CommandContext(t.Context(), "go", args...).CombinedOutput(); err != nil {
			t.Fatalf("go %v: %v\n%s", args, err, out)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()

	cmd := exec.CommandContext(ctx, local, "try", "-template", filepath.Join("..", "..", "..", "template.yaml"),
		"Target=lambda:orders-consumer", "ExistingQueueArn=arn:aws:sqs:us-east-1:123456789012:orders")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	// Through a pipe of our own, so that Wait can run beside the reader.
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		pw.Close()
		exited <- err
	}()
	ended := false
	defer func() {
		if !ended {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	out := newLines(pr)
	// awaitIn waits up to d for a line that has every one of want, and
	// returns it.
	awaitIn := func(d time.Duration, what string, want ...string) string {
		t.Helper()
		actx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		line, ok := out.await(actx, func(l string) bool {
			for _, w := range want {
				if !strings.Contains(l, w) {
					return false
				}
			}
			return true
		})
		if !ok {
			t.Fatalf("%s: no line with %q in time:\n%s\n%s", what, want, out.text(), stderr.String())
		}
		return line
	}
	// Each line after the ready one comes within seconds of its cause; a
	// minute is room for a loaded machine, and a missing line fails in
	// that time.
	await := func(what string, want ...string) string {
		t.Helper()
		return awaitIn(awaitLine, what, want...)
	}
	// The start (moto_server, the deploy) has the whole test's time.
	ready := awaitIn(8*time.Minute, "the ready line", "ready: ")
	endpoint, _, _ := strings.Cut(strings.TrimPrefix(ready, "ready: "), " ")
	printed := out.text()

	// The environment as a shell would have it after the export lines.
	env := os.Environ()
	var pathDir string
	for _, line := range strings.Split(printed, "\n") {
		kv, ok := strings.CutPrefix(strings.TrimSpace(line), "export ")
		if !ok {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		if k == "PATH" {
			pathDir, _, _ = strings.Cut(v, ":")
		}
		env = append(env, k+"="+os.Expand(v, func(name string) string { return getenv(env, name) }))
	}
	// The printed commands name sqs-once, and the printed PATH has the CLI
	// make cli built first.
	if pathDir != bin {
		t.Errorf("the printed PATH starts with %q, want the directory of sqs-once, %s:\n%s", pathDir, bin, printed)
	}
	for _, want := range []string{"AWS_ENDPOINT_URL=" + endpoint, "AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true",
		"\n  sqs-once preflight --stack orders-once\n", "\n  sqs-once cutover --stack orders-once --yes\n",
		"\n  sqs-once cutover --stack orders-once --rollback --yes\n", "\n  sqs-once status --stack orders-once\n",
		"\n  sqs-once inspect --stack orders-once order-42\n"} {
		if !strings.Contains(printed, want) {
			t.Errorf("the printed instructions lack %q:\n%s", want, printed)
		}
	}
	var sends []string
	for _, line := range strings.Split(printed, "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "aws sqs send-message ") {
			sends = append(sends, l)
		}
	}
	if len(sends) != 2 || sends[0] != sends[1] || !strings.Contains(sends[0], "--endpoint-url "+endpoint+" ") || !strings.Contains(sends[0], `"orderId":"order-42"`) {
		t.Fatalf("want two copies of one send-message line of order-42 with --endpoint-url %s, got %q:\n%s", endpoint, sends, printed)
	}
	// shell runs a printed line as a user pastes it, in the printed
	// environment (the CLI found on its PATH).
	shell := func(line string) string {
		t.Helper()
		c := exec.CommandContext(ctx, "sh", "-c", line)
		c.Env = env
		b, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, b)
		}
		return string(b)
	}
	run := func(wantCode int, args ...string) string {
		t.Helper()
		c := exec.CommandContext(ctx, "sh", "-c", "sqs-once "+strings.Join(args, " "))
		c.Env = env
		b, err := c.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("sqs-once %v: %v", args, err)
		}
		if code != wantCode {
			t.Errorf("sqs-once %v: exit %d, want %d\n%s", args, code, wantCode, b)
		}
		return string(b)
	}

	// Before the cutover the consumer reads the queue through its own
	// mapping, as it does today.
	await("the consumer's mapping", "orders-consumer reads orders (its mapping is Enabled)")
	shell(strings.ReplaceAll(sends[0], "order-42", "order-7"))
	await("an order before the cutover", "orders-consumer: run 1 for order order-7 ", "read by its own mapping")

	if got := run(0, "preflight", "--stack", "orders-once"); !strings.Contains(got, "ok    store: table") || !strings.Contains(got, "ok    mappings: ready to cut over") {
		t.Errorf("preflight does not print its checks:\n%s", got)
	}
	if got := run(0, "cutover", "--stack", "orders-once", "--yes"); !strings.Contains(got, "done: the processor of stack orders-once consumes orders and hands each message it holds to orders-consumer") {
		t.Errorf("cutover does not switch the queue to the stack:\n%s", got)
	}
	// Read back, not taken from cutover's word: the mappings are switched.
	if got := run(0, "preflight", "--stack", "orders-once"); !strings.Contains(got, "ok    mappings: cut over: the stack's mapping") {
		t.Errorf("after the cutover, preflight does not see the stack's mapping on:\n%s", got)
	}
	// The two sends as printed, at once after the cutover, as a user
	// pastes them: one run of the consumer, one duplicate.
	shell(sends[0])
	shell(sends[1])
	await("the order through the processor", "orders-consumer: run 1 for order order-42 ", "handed over by the stack's processor")
	await("the second copy", "key order-42 duplicate", "deleted without running orders-consumer", "1 duplicate so far")
	// Both copies are resolved now (the duplicate is deleted): no other
	// run of the consumer for the order can follow.
	if got := out.text(); strings.Count(got, "orders-consumer: run ") != 2 || strings.Count(got, " for order order-42 ") != 1 {
		t.Errorf("want one run of the consumer for order-42 (and one for order-7, before the cutover):\n%s", got)
	}
	var st struct {
		Queues []struct {
			Name              string
			Visible, InFlight int
		}
	}
	if err := json.Unmarshal([]byte(run(0, "status", "--stack", "orders-once", "--json")), &st); err != nil {
		t.Fatalf("status --json: %v", err)
	}
	for _, q := range st.Queues {
		if q.Visible+q.InFlight != 0 {
			t.Errorf("status: queue %s holds %d visible, %d in flight after both copies were handled", q.Name, q.Visible, q.InFlight)
		}
	}
	// As the page shows it: the queues, and no raw SDK error for the
	// oldest age the emulator cannot serve.
	if got := run(0, "status", "--stack", "orders-once"); !strings.Contains(got, "main") || !strings.Contains(got, "operator") || !strings.Contains(got, "oldest: not available on this endpoint") {
		t.Errorf("status does not show the queues as docs/getting-started.md does:\n%s", got)
	}
	if got := run(0, "inspect", "--stack", "orders-once", "order-42"); !strings.Contains(got, "status       COMPLETED") {
		t.Errorf("inspect does not show the order completed:\n%s", got)
	}
	if got := run(0, "cutover", "--stack", "orders-once", "--rollback", "--yes"); !strings.Contains(got, "orders-consumer consumes orders itself again") || strings.Contains(got, "nothing changed") {
		t.Errorf("rollback does not switch back:\n%s", got)
	}
	if got := run(0, "preflight", "--stack", "orders-once"); !strings.Contains(got, "ok    mappings: ready to cut over: orders-consumer's mapping") {
		t.Errorf("after the rollback, preflight does not see the consumer's mapping on again:\n%s", got)
	}
	// The rollback returns the queue to the consumer: an order sent now
	// reaches it through its own mapping again.
	shell(strings.ReplaceAll(sends[0], "order-42", "order-9"))
	await("an order after the rollback", "orders-consumer: run 1 for order order-9 ", "read by its own mapping")

	// Ctrl-C: it ends, and so does its moto_server.
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		ended = true
		if err != nil {
			t.Errorf("sqs-once-local try after Ctrl-C: %v\n%s", err, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("sqs-once-local try did not end after Ctrl-C")
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second); err == nil {
		conn.Close()
		t.Errorf("moto_server still answers on %s after sqs-once-local try ended", u.Host)
	}
}

// awaitLine is how long the test waits for a line sqs-once-local try prints
// once its cause has happened.
const awaitLine = time.Minute

// getenv is name's value in env, the last one set.
func getenv(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}

// lines collects a reader's lines as they come, for awaiting one.
type lines struct {
	mu    sync.Mutex
	all   []string
	added chan struct{} // closed and replaced on each line
	done  bool
}

func newLines(r io.Reader) *lines {
	l := &lines{added: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			l.mu.Lock()
			l.all = append(l.all, sc.Text())
			close(l.added)
			l.added = make(chan struct{})
			l.mu.Unlock()
		}
		// The rest is drained, so the process never blocks on its output.
		_, _ = io.Copy(io.Discard, r)
		l.mu.Lock()
		l.done = true
		close(l.added)
		l.mu.Unlock()
	}()
	return l
}

// await returns the first line, from the start, that match accepts, once
// there is one; false when the reader ended or ctx did first.
func (l *lines) await(ctx context.Context, match func(string) bool) (string, bool) {
	for {
		l.mu.Lock()
		for _, line := range l.all {
			if match(line) {
				l.mu.Unlock()
				return line, true
			}
		}
		added, done := l.added, l.done
		l.mu.Unlock()
		if done {
			return "", false
		}
		select {
		case <-added:
		case <-ctx.Done():
			return "", false
		}
	}
}

func (l *lines) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n") + "\n"
}

// syncBuffer is a strings.Builder safe for the process's writes beside the
// test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
