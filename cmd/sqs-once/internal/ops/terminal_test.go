//go:build integration

package ops_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
)

// buildCLI builds cmd/sqs-once as a person installs it, with the race
// detector when this test binary has it (its packages are then in the build
// cache already).
func buildCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sqs-once")
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command(gobin, append(args, "github.com/sqs-once/sqs-once/cmd/sqs-once")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/sqs-once: %v\n%s", err, out)
	}
	return bin
}

// tmux drives a real terminal: a private tmux server, one 100x30 window.
type tmux struct {
	t      *testing.T
	socket string
}

func newTmux(t *testing.T, command string) *tmux {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("the terminal test needs tmux, which is not on PATH: install it with `apt-get install -y tmux`")
	}
	tm := &tmux{t: t, socket: mototest.Name("sqs-once-test")}
	// The server starts with this process's environment: the AWS settings
	// mototest pointed at moto_server.
	tm.cmd("new-session", "-d", "-x", "100", "-y", "30", "-s", "cli", command)
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", tm.socket, "kill-server").Run() })
	return tm
}

func (tm *tmux) cmd(args ...string) string {
	tm.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", tm.socket}, args...)...).CombinedOutput()
	if err != nil {
		tm.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// screen is what the terminal shows now.
func (tm *tmux) screen() string { return tm.cmd("capture-pane", "-p", "-t", "cli") }

// waitFor polls the screen until it matches, and returns every distinct
// screen seen on the way.
func (tm *tmux) waitFor(what string, match func(string) bool) []string {
	tm.t.Helper()
	var seen []string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		s := tm.screen()
		if len(seen) == 0 || seen[len(seen)-1] != s {
			seen = append(seen, s)
		}
		if match(s) {
			return seen
		}
		time.Sleep(20 * time.Millisecond)
	}
	tm.t.Fatalf("the terminal never showed %s; last screen:\n%s", what, seen[len(seen)-1])
	return nil
}

// A bar mid-way: the title, a partly filled bar, the counts and the status.
var midBar = regexp.MustCompile(`redrive operator -> main\s+([1-9]|[12][0-9])/30\s+\[=*>?-+\]\s+moved \d+, copies 0, skipped 0, failed 0`)

// The spinner's status and the summary, each count with its noun in the
// number that agrees with it.
var (
	scannedLocks      = regexp.MustCompile(`(\b1 item|\b(0|[2-9]|\d\d+) items) scanned, (\b1 lock\b|\b(0|[2-9]|\d\d+) locks)`)
	processingRecords = regexp.MustCompile(`(\b1 PROCESSING record|\b(0|[2-9]|\d\d+) PROCESSING records) under .* \((1 item|(0|[2-9]|\d\d+) items) scanned\)`)
)

// TestCLIBinary runs the installed command as a person would: on a
// terminal (tmux), and through pipes as a script would.
func TestCLIBinary(t *testing.T) {
	t.Parallel()
	bin := buildCLI(t)
	t.Run("redrive on a terminal", func(t *testing.T) { terminalRedrive(t, bin) })
	t.Run("status --locks on a terminal", func(t *testing.T) { terminalStatusLocks(t, bin) })
	t.Run("no progress bar without a terminal", func(t *testing.T) { noProgressBarWithoutTerminal(t, bin) })
}

func terminalRedrive(t *testing.T, bin string) {
	emptyQueues(t)
	st := stack(t)
	cfg := mototest.Config(t)
	send(t, cfg, output(t, "OperatorQueueUrl"), messages(30, maxAttempts)...)
	// Each send to the main queue takes 300 ms, so that the bar is on the
	// screen long enough to be read mid-way.
	proxy, _ := proxied(t)
	proxy.Script("SendMessageBatch", faultproxy.Delay(300*time.Millisecond), faultproxy.Delay(300*time.Millisecond), faultproxy.Delay(300*time.Millisecond))

	tm := newTmux(t, "AWS_ENDPOINT_URL="+proxy.URL+" "+bin+" redrive --stack "+st.Name+" --from operator --to main; echo EXIT=$?; sleep 60")
	tm.waitFor("the question", func(s string) bool {
		return strings.Contains(s, "about 30 visible) to main, resetting sqs-dlq-replay-nb? [y/N]")
	})
	tm.cmd("send-keys", "-t", "cli", "y", "Enter")
	screens := tm.waitFor("the exit status", func(s string) bool { return strings.Contains(s, "EXIT=") })
	final := screens[len(screens)-1]
	t.Logf("final screen:\n%s", strings.TrimRight(final, "\n"))

	var mid string
	for _, s := range screens {
		if midBar.MatchString(s) {
			mid = s
			break
		}
	}
	if mid == "" {
		t.Errorf("no screen showed the progress bar mid-way (%d screens); the last:\n%s", len(screens), final)
	} else {
		t.Logf("mid-way screen:\n%s", strings.TrimRight(mid, "\n"))
	}
	for _, want := range []string{
		"redrive operator -> main 30/30",
		"moved 30, copies 0, skipped 0, failed 0",
		"redrive operator -> main: done",
		"moved 30",
		"EXIT=0",
	} {
		if !strings.Contains(words(final), want) {
			t.Errorf("the final screen does not show %q", want)
		}
	}
	// Nothing garbled: the bar is drawn once, above the summary.
	if n := strings.Count(final, "30/30"); n != 1 {
		t.Errorf("the finished bar appears %d times on the final screen", n)
	}
	if strings.Index(final, "30/30") > strings.Index(final, ": done") {
		t.Errorf("the bar is drawn below the summary")
	}
}

func terminalStatusLocks(t *testing.T, bin string) {
	st := stack(t)
	tm := newTmux(t, bin+" status --stack "+st.Name+" --locks; echo EXIT=$?; sleep 60")
	screens := tm.waitFor("the exit status", func(s string) bool { return strings.Contains(s, "EXIT=") })
	final := screens[len(screens)-1]
	t.Logf("final screen:\n%s", strings.TrimRight(final, "\n"))
	for _, want := range []string{
		"scanning " + output(t, "IdempotencyTableName"),
		"queue visible in flight delayed oldest", " under " + st.Name + "-processor#", "EXIT=0",
	} {
		if !strings.Contains(words(final), want) {
			t.Errorf("the screen does not show %q", want)
		}
	}
	// Counts agree with their nouns: "1 item scanned, 1 lock".
	for _, re := range []*regexp.Regexp{scannedLocks, processingRecords} {
		if !re.MatchString(words(final)) {
			t.Errorf("the screen does not match %s", re)
		}
	}
}

func noProgressBarWithoutTerminal(t *testing.T, bin string) {
	emptyQueues(t)
	st := stack(t)
	cfg := mototest.Config(t)
	send(t, cfg, output(t, "OperatorQueueUrl"), messages(15, maxAttempts)...)
	cmd := exec.CommandContext(context.Background(), bin, "redrive", "--stack", st.Name, "--from", "operator", "--to", "main")
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader("y\n"), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sqs-once redrive through pipes: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	if !strings.Contains(words(stdout.String()), "redrive operator -> main: done moved 15") {
		t.Errorf("no summary on stdout")
	}
	for name, s := range map[string]string{"stdout": stdout.String(), "stderr": stderr.String()} {
		if strings.Contains(s, "\x1b[") || strings.Contains(s, "\r") || strings.Contains(s, "/15") {
			t.Errorf("%s is not a terminal, yet has a progress bar or escape sequences: %q", name, s)
		}
	}
}
