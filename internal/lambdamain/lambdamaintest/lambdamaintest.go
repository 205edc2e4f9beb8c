// Package lambdamaintest checks a Lambda command's start-up in a fresh process,
// as Lambda runs it.
package lambdamaintest

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/internal/lambdamain"
	"github.com/sqs-once/sqs-once/internal/local/lambdaruntime"
)

// runMainVar asks a test binary to run the function's main instead of its
// tests, so start-up can be checked as Lambda runs it: a fresh process with
// only the given environment.
const runMainVar = "SQS_ONCE_RUN_MAIN"

// TestMain runs main when the test binary was started by CheckBadConfig, and
// the package's tests otherwise. Call it from the command's TestMain.
func TestMain(m *testing.M, main func()) { TestMainWith(m, main, Run) }

// Run runs the package's tests and exits with their status: TestMainWith's
// run for tests that need no server.
func Run(m *testing.M) { os.Exit(m.Run()) }

// TestMainWith is TestMain with run running the package's tests
// (mototest.Main, for tests that need moto_server).
func TestMainWith(m *testing.M, main func(), run func(*testing.M)) {
	if os.Getenv(runMainVar) == "1" {
		main()
		return
	}
	run(m)
}

// Invoke runs the command as Lambda does, under the Runtime API emulator
// (its process sees only env, the test process's AWS_ variables, which
// mototest.Main points at moto_server, and what the emulator sets), invokes
// it with
// each event in turn, and returns the invocations' results and everything
// the process wrote to stdout and stderr, where Lambda takes its logs from.
// The command's TestMain must be TestMain or TestMainWith.
func Invoke(t *testing.T, functionARN string, env []string, events ...[]byte) ([]lambdaruntime.Result, string) {
	t.Helper()
	rt, err := lambdaruntime.Start(functionARN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	full := []string{runMainVar + "=1"}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "AWS_") {
			full = append(full, kv)
		}
	}
	p, err := rt.StartProcess(os.Args[0], append(full, env...))
	if err != nil {
		t.Fatal(err)
	}
	var results []lambdaruntime.Result
	for _, ev := range events {
		res, err := p.Invoke(t.Context(), ev, 30*time.Second)
		if err != nil {
			_ = p.Kill()
			t.Fatalf("Invoke: %v; output:\n%s", err, p.Output())
		}
		results = append(results, res)
	}
	// Kill waits for the copying of all the process wrote.
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	return results, p.Output()
}

// CheckBadConfig starts the command with env and asserts that start-up fails
// with a bad-configuration exit status and an error naming each of names.
func CheckBadConfig(t *testing.T, env []string, names ...string) {
	t.Helper()
	want := make([]string, len(names))
	for i, name := range names {
		want[i] = "environment variable " + name + ":"
	}
	CheckStartFails(t, env, want...)
}

// CheckStartFails starts the command with env and asserts that start-up
// fails with a bad-configuration exit status and an output containing each
// of want.
func CheckStartFails(t *testing.T, env []string, want ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append([]string{runMainVar + "=1", "AWS_EC2_METADATA_DISABLED=true"}, env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != lambdamain.ExitBadConfig {
		t.Fatalf("exit %v, want status %d; output:\n%s", err, lambdamain.ExitBadConfig, out)
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Errorf("output does not say %q:\n%s", w, out)
		}
	}
}
