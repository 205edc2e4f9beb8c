//go:build integration

package motoserver_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sqs-once/sqs-once/internal/local/motoserver"
)

// pythonRun runs the scripts of testdata in-process with moto, with and
// without the patches of python/.
type pythonRun struct {
	t       *testing.T
	patched string // a PYTHONPATH holding the patches
}

func newPythonRun(t *testing.T) *pythonRun {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 is not on PATH: make setup installs it (as root) or prints the command that does")
	}
	dir := t.TempDir()
	if err := motoserver.WritePatches(dir); err != nil {
		t.Fatal(err)
	}
	return &pythonRun{t: t, patched: dir}
}

// run runs testdata/script, patched or not, and returns what it printed.
func (r *pythonRun) run(script string, patched bool) string {
	r.t.Helper()
	out, err := r.output(script, patched)
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

// runBoth runs testdata/script unpatched and patched at once, two
// processes (most of each is importing moto, and the unpatched run of a
// costly path is slow by design), and returns what each printed.
func (r *pythonRun) runBoth(script string) (plain, patched string) {
	r.t.Helper()
	var outs [2]string
	var errs [2]error
	var wg sync.WaitGroup
	for i, p := range []bool{false, true} {
		wg.Go(func() { outs[i], errs[i] = r.output(script, p) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			r.t.Fatal(err)
		}
	}
	return outs[0], outs[1]
}

// output runs testdata/script, patched or not, and returns what it
// printed. It may run in a goroutine of its own: it reports, never fails t.
func (r *pythonRun) output(script string, patched bool) (string, error) {
	t := r.t
	abs, err := filepath.Abs(filepath.Join("testdata", script))
	if err != nil {
		return "", err
	}
	pythonPath := t.TempDir()
	if patched {
		pythonPath = r.patched
	}
	cmd := exec.Command("python3", abs)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonPath, "SQS_ONCE_MOTO_PATCHED="+filepath.Join(t.TempDir(), "mark"))
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("python3 %s: %v\n%s\n(moto must be importable by python3: make setup installs it into .venv, which make puts first on PATH)", script, err, stderr.String())
	}
	return strings.TrimSpace(out.String()), nil
}
