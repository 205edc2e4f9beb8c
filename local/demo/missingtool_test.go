package demo

import (
	"bytes"
	"strings"
	"testing"
)

// TestMainWithoutMotoServerSaysOnceWhatToRun: the demo's entry, with
// moto_server hidden from PATH, names the fix exactly once and starts
// nothing. It starts three servers side by side (the stack's and the
// table's partitions), and each used to report the missing moto_server.
func TestMainWithoutMotoServerSaysOnceWhatToRun(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	var stdout, stderr bytes.Buffer
	code := Main(t.Context(), []string{"-out", t.TempDir()}, &stdout, &stderr)
	out := stdout.String() + stderr.String()
	if code != ExitUsage {
		t.Errorf("exit status %d, want %d (set-up failure)\n%s", code, ExitUsage, out)
	}
	if n := strings.Count(out, "moto_server (moto 5) is not on PATH"); n != 1 {
		t.Errorf("the missing moto_server is reported %d times, want once:\n%s", n, out)
	}
	if !strings.Contains(out, "make setup-demo") || !strings.Contains(out, "requirements-dev.txt") {
		t.Errorf("the report does not say what to run (make setup-demo) or what it installs (requirements-dev.txt):\n%s", out)
	}
	if strings.Contains(out, "starting moto_server") {
		t.Errorf("the demo claims to start moto_server without one:\n%s", out)
	}
}
