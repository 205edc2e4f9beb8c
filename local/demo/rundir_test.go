package demo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTheTemporaryDirectoryIsRemovedUnlessKept: a run without -out leaves
// no sqs-once-demo-* directory in the temporary directory unless -keep,
// and its report then names no path in it; -keep and -out keep theirs,
// and the report names the ledger and the logs.
func TestTheTemporaryDirectoryIsRemovedUnlessKept(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func(out string) Options
		kept bool
	}{
		{"default", func(string) Options { return Options{} }, false},
		{"keep", func(string) Options { return Options{Keep: true} }, true},
		{"out", func(out string) Options { return Options{Out: out} }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			out := filepath.Join(t.TempDir(), "run")
			var used string
			sum, err := inRunDir(tc.opts(out), func(dir string) (Summary, error) {
				used = dir
				for _, f := range []string{"ledger.jsonl", "functions.log"} {
					if err := os.WriteFile(filepath.Join(dir, f), []byte("x\n"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				return Summary{Ledger: filepath.Join(dir, "ledger.jsonl"), Logs: filepath.Join(dir, "functions.log")}, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			_, statErr := os.Stat(filepath.Join(used, "ledger.jsonl"))
			left, _ := filepath.Glob(filepath.Join(tmp, "sqs-once-demo-*"))
			text := sum.Render()
			if tc.kept {
				if statErr != nil || sum.Removed || sum.Ledger == "" || !strings.Contains(text, "function logs         "+sum.Logs) {
					t.Errorf("kept run: ledger %v, summary %q/%q removed %v; want the directory kept and named:\n%s", statErr, sum.Ledger, sum.Logs, sum.Removed, text)
				}
				return
			}
			if statErr == nil || len(left) != 0 {
				t.Errorf("the run left %v behind (%s: %v); want its temporary directory removed", left, used, statErr)
			}
			if !sum.Removed || sum.Ledger != "" || sum.Logs != "" || strings.Contains(text, used) || !strings.Contains(text, "-keep or -out DIR keeps them") {
				t.Errorf("the report of a removed run names %q/%q (removed %v); want no path, and how to keep them:\n%s", sum.Ledger, sum.Logs, sum.Removed, text)
			}
		})
	}
}
