package layout

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoExportShims: every package of the tree (the library's, the
// harness's, the CLI's) is tested from inside (package sqsonce's lock engine
// on the in-memory store) or through its public API, never through
// internals an export_test.go file re-exports for an external test package:
// such a shim is API only tests can see, and it drifts from what users get.
func TestNoExportShims(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	seen := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// Installed tools and version control hold no code of ours.
			switch d.Name() {
			case ".git", ".tools", ".venv", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(d.Name(), "_test.go") {
			return nil
		}
		seen++
		if strings.HasSuffix(d.Name(), "export_test.go") {
			t.Errorf("%s: an export shim; test the package from inside, or through its API", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen == 0 {
		t.Fatalf("no test file under %s: the walk looks in the wrong place", root)
	}
}
