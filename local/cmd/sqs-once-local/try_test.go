//go:build integration

package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTryFollowsTheGettingStartedPage runs what docs/getting-started.md
// walks through: `sqs-once-local try` with a Target= and ExistingQueueArn=,
// then the operator CLI with the environment it prints: preflight passes,
// cutover moves the queue to the stack, status shows the queues, rollback
// moves it back; Ctrl-C ends it and its moto_server.
func TestTryFollowsTheGettingStartedPage(t *testing.T) {
	bin := t.TempDir()
	local := filepath.Join(bin, "sqs-once-local")
	cli := filepath.Join(bin, "sqs-once")
	for _, b := range [][]string{{"-o", local, "."}, {"-C", filepath.Join("..", "..", "..", "cmd", "sqs-once"), "build", "-o", cli, "."}} {
		args := append([]string{"build"}, b...)
		if b[0] == "-C" {
			args = b
		}
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
	var stderr strings.Builder
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
	var printed []string
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	// Read up to the ready line (the drain above takes the rest).
	env := os.Environ()
	var endpoint string
	sc := lines
	for endpoint == "" {
		select {
		case line, ok := <-sc:
			if !ok {
				t.Fatalf("sqs-once-local try ended before its ready line:\n%s\n%s", strings.Join(printed, "\n"), stderr.String())
			}
			printed = append(printed, line)
			if kv, ok := strings.CutPrefix(strings.TrimSpace(line), "export "); ok {
				env = append(env, kv)
			}
			if rest, ok := strings.CutPrefix(line, "ready: "); ok {
				endpoint, _, _ = strings.Cut(rest, " ")
			}
		case <-ctx.Done():
			t.Fatalf("no ready line in time:\n%s\n%s", strings.Join(printed, "\n"), stderr.String())
		}
	}
	// The rest is drained, so the process never blocks on its output.
	go func() {
		for range lines {
		}
	}()
	out := strings.Join(printed, "\n")
	for _, want := range []string{"AWS_ENDPOINT_URL=" + endpoint, "AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true",
		"sqs-once preflight --stack orders-once", "sqs-once cutover --stack orders-once --yes",
		"sqs-once cutover --stack orders-once --rollback --yes", "sqs-once status --stack orders-once", "sqs-once inspect --stack orders-once"} {
		if !strings.Contains(out, want) {
			t.Errorf("the printed instructions lack %q:\n%s", want, out)
		}
	}

	run := func(wantCode int, args ...string) string {
		t.Helper()
		c := exec.CommandContext(ctx, cli, args...)
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
	if got := run(0, "status", "--stack", "orders-once"); !strings.Contains(got, "main") || !strings.Contains(got, "operator") {
		t.Errorf("status does not show the queues:\n%s", got)
	}
	if got := run(4, "inspect", "--stack", "orders-once", "order-42"); !strings.Contains(got, "not found") {
		t.Errorf("inspect of a key never processed:\n%s", got)
	}
	if got := run(0, "cutover", "--stack", "orders-once", "--rollback", "--yes"); !strings.Contains(got, "orders-consumer consumes orders itself again") || strings.Contains(got, "nothing changed") {
		t.Errorf("rollback does not switch back:\n%s", got)
	}
	if got := run(0, "preflight", "--stack", "orders-once"); !strings.Contains(got, "ok    mappings: ready to cut over: orders-consumer's mapping") {
		t.Errorf("after the rollback, preflight does not see the consumer's mapping on again:\n%s", got)
	}

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
