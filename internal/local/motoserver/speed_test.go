package motoserver_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sqs-once/sqs-once/internal/local/motoserver"
)

// TestSpeedPatchesChangeCostsNotAnswers runs the moto code paths that
// python/sqs_once_speed.py changes, in-process, with and without the
// patches: an expired message among 300, one conditional update text with
// other values, the dispatcher's lookups. The answers must be the same; the
// costs must fall: no walk of the queue's attributes per received message,
// one lexing and one parse per expression text, one lookup per host.
func TestSpeedPatchesChangeCostsNotAnswers(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 is not on PATH: apt-get install -y python3 python3-pip && pip install 'moto[server]'")
	}
	script, err := filepath.Abs(filepath.Join("testdata", "speed_patches.py"))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		Answers map[string]any
		Cost    map[string]int
	}
	run := func(pythonPath string) result {
		t.Helper()
		cmd := exec.Command("python3", script)
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonPath, "SQS_ONCE_MOTO_PATCHED="+filepath.Join(t.TempDir(), "mark"))
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("python3 %s: %v\n%s\n(moto must be importable by python3: pip install 'moto[server]')", script, err, stderr.String())
		}
		var r result
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("python3 %s printed %q: %v", script, out.String(), err)
		}
		return r
	}
	patchDir := t.TempDir()
	if err := motoserver.WritePatches(patchDir); err != nil {
		t.Fatal(err)
	}
	plain, patched := run(t.TempDir()), run(patchDir)

	if !reflect.DeepEqual(plain.Answers, patched.Answers) {
		t.Errorf("the patches change moto's answers:\n unpatched %v\n patched   %v", plain.Answers, patched.Answers)
	}
	if got := plain.Answers["sqs_expired_delivered"]; got != false {
		t.Errorf("an expired message was delivered (%v): the script no longer tests the retention check", got)
	}
	if got := plain.Answers["ddb_outcomes"]; !reflect.DeepEqual(got, []any{"ok", "ok", "refused"}) {
		t.Errorf("conditional updates answered %v, want ok, ok, refused: the script no longer tests values under one text", got)
	}
	want := map[string]int{"queue_attributes": 0, "condition_lexes": 1, "update_tokenizations": 1, "module_listings": 2}
	for name, n := range want {
		if patched.Cost[name] != n {
			t.Errorf("patched %s = %d, want %d", name, patched.Cost[name], n)
		}
		if plain.Cost[name] <= n {
			t.Errorf("unpatched %s = %d, want more than %d: the cost no longer shows; if moto removed it upstream, its patch may go", name, plain.Cost[name], n)
		}
	}
}
