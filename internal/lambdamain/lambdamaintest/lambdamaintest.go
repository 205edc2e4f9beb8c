// Package lambdamaintest checks a Lambda command's start-up in a fresh process,
// as Lambda runs it.
package lambdamaintest

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sqs-once/sqs-once/internal/lambdamain"
)

// runMainVar asks a test binary to run the function's main instead of its
// tests, so start-up can be checked as Lambda runs it: a fresh process with
// only the given environment.
const runMainVar = "SQS_ONCE_RUN_MAIN"

// TestMain runs main when the test binary was started by CheckBadConfig, and
// the package's tests otherwise. Call it from the command's TestMain.
func TestMain(m *testing.M, main func()) {
	if os.Getenv(runMainVar) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
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
