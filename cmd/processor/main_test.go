package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The test binary runs main itself when asked, so start-up can be checked as
// Lambda would run it: a fresh process with only the given environment.
func TestMain(m *testing.M) {
	if os.Getenv("PROCESSOR_RUN_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func TestBadConfigurationStopsStartUp(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = []string{"PROCESSOR_RUN_MAIN=1", "IDEMPOTENCY_KEY=body:orderId", "IN_PROGRESS=skip", "AWS_EC2_METADATA_DISABLED=true"}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("exit %v, want a non-zero exit; output:\n%s", err, out)
	}
	for _, name := range []string{"IDEMPOTENCY_TABLE", "KEY_PREFIX", "IDEMPOTENCY_KEY", "IN_PROGRESS"} {
		if !strings.Contains(string(out), name) {
			t.Errorf("output does not name %s:\n%s", name, out)
		}
	}
}
