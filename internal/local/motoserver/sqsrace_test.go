package motoserver_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSQSDeleteRaceIsPatched runs moto's SQS backend in-process with two
// deletes forced to overlap (a slowed receipt-handle check) and a send
// between them: without sitecustomize.py the second delete's rebuilt message
// list drops the sent message, with it the message stays. This is the race
// that lost messages in loaded demo runs; Start refuses a moto_server that
// did not load the fix.
func TestSQSDeleteRaceIsPatched(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 is not on PATH: apt-get install -y python3 python3-pip && pip install 'moto[server]'")
	}
	script, err := filepath.Abs("testdata/sqs_delete_race.py")
	if err != nil {
		t.Fatal(err)
	}
	patched := t.TempDir()
	fix, err := os.ReadFile("sitecustomize.py")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(patched, "sitecustomize.py"), fix, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(pythonPath string) string {
		t.Helper()
		cmd := exec.Command("python3", script)
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonPath, "SQS_ONCE_MOTO_PATCHED=")
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("python3 %s: %v\n%s\n(moto must be importable by python3: pip install 'moto[server]')", script, err, stderr.String())
		}
		return strings.TrimSpace(out.String())
	}
	if got := run(t.TempDir()); got != "lost" {
		t.Errorf("unpatched moto: %q, want \"lost\": the race no longer shows; if moto fixed it upstream, sitecustomize.py may go", got)
	}
	if got := run(patched); got != "present" {
		t.Errorf("patched moto: %q, want \"present\": the fix does not hold", got)
	}
}
