// Package lambdamaintest checks a Lambda command's start-up in a fresh process,
// as Lambda runs it.
package lambdamaintest

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/internal/lambdamain"
	"github.com/sqs-once/sqs-once/internal/local/lambdaruntime"
	"github.com/sqs-once/sqs-once/internal/version"
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
	out := startFailing(t, env)
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output does not say %q:\n%s", w, out)
		}
	}
}

// CheckStartLine starts the command with env, which must stop start-up
// (it needs no server then), and with AWS_LAMBDA_LOG_FORMAT=JSON, as the
// template's LogFormat makes Lambda set it. It asserts that the first line
// is the JSON log line "sqs-once <function> starting" with the release
// (version.Version): it comes before anything that can fail.
func CheckStartLine(t *testing.T, env []string, function string) {
	t.Helper()
	out := startFailing(t, append(slices.Clip(env), "AWS_LAMBDA_LOG_FORMAT=JSON"))
	first, _, _ := strings.Cut(out, "\n")
	var line struct{ Level, Message, Version string }
	if err := json.Unmarshal([]byte(first), &line); err != nil {
		t.Fatalf("first line %q is not a JSON log line: %v; output:\n%s", first, err, out)
	}
	want := "sqs-once " + function + " starting"
	if line.Level != "INFO" || line.Message != want || line.Version != version.Version {
		t.Errorf("first line %s, want level INFO, message %q and version %q", first, want, version.Version)
	}
}

// startFailing runs main in a fresh process with only env (and no instance
// metadata), asserts that it stops with a bad-configuration exit status,
// and returns everything it wrote.
func startFailing(t *testing.T, env []string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append([]string{runMainVar + "=1", "AWS_EC2_METADATA_DISABLED=true"}, env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != lambdamain.ExitBadConfig {
		t.Fatalf("exit %v, want status %d; output:\n%s", err, lambdamain.ExitBadConfig, out)
	}
	return string(out)
}
