package motoserver_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqs-once/sqs-once/internal/local/motoserver"
)

// TestSQSDeleteRaceIsPatched runs moto's SQS backend in-process with the
// two races python/sqs_once_races.py fixes forced to happen (a slowed receipt-handle
// check widens them): two overlapping deletes with a send between them, and
// a receive moving messages to the DLQ while a delete walks the list.
// Without the fix the sent message is lost, and the queues hold the wrong
// messages; with it both come out right. These races lost messages in
// loaded demo runs; Start refuses a moto_server that did not load the fix.
func TestSQSDeleteRaceIsPatched(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 is not on PATH: apt-get install -y python3 python3-pip && pip install 'moto[server]'")
	}
	scripts := map[string]string{}
	for _, name := range []string{"sqs_delete_race.py", "sqs_dlq_move_race.py"} {
		abs, err := filepath.Abs(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		scripts[name] = abs
	}
	patched := t.TempDir()
	if err := motoserver.WritePatches(patched); err != nil {
		t.Fatal(err)
	}
	run := func(script, pythonPath string) string {
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
	for name, script := range scripts {
		if got := run(script, t.TempDir()); got == "present" {
			t.Errorf("%s, unpatched moto: %q: the race no longer shows; if moto fixed it upstream, its fix in python/sqs_once_races.py may go", name, got)
		}
		if got := run(script, patched); got != "present" {
			t.Errorf("%s, patched moto: %q, want \"present\": the fix does not hold", name, got)
		}
	}
}
