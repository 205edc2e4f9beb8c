package mototest_test

import (
	"errors"
	"fmt"
	"go/build"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// local is the machinery that starts servers (moto_server, dynalite,
// redis-server, the fault proxy, the Lambda runtime, the event source
// mappings; the deployed stack and the demo are the local module's): a
// test that imports any of it belongs to the integration tier.
const local = "internal/local/"

// TestHermeticTierStartsNoServer keeps plain `go test ./...` runnable with
// only Go: no test file that builds without the integration tag may import
// the local machinery, except a package's own tests of itself (faultproxy's
// tests of the proxy on an httptest upstream, say).
func TestHermeticTierStartsNoServer(t *testing.T) {
	root, module := moduleRoot(t)
	bad, tagged, err := scan(root, module)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("%s: add `//go:build integration` (and a blank line) at the top, or test with a fake", b)
	}
	// The module's own integration tests import mototest: seeing none
	// means the walk looked in the wrong place, and the check above proved
	// nothing.
	if tagged == 0 {
		t.Errorf("no integration test file under %s imports %s/%smototest: the walk missed the module", root, module, local)
	}
}

// TestScanFlagsOnlyUntaggedImports runs the check on a module made up for
// it, so that each rule is seen to hold and to fail.
func TestScanFlagsOnlyUntaggedImports(t *testing.T) {
	root := t.TempDir()
	const module = "example.com/m"
	imp := func(pkgs ...string) string {
		var b strings.Builder
		for _, p := range pkgs {
			b.WriteString("import _ " + strconv.Quote(module+"/"+p) + "\n")
		}
		return b.String()
	}
	files := map[string]string{
		"go.mod":                              "module " + module + "\n",
		"a/untagged_test.go":                  "package a\n" + imp("internal/local/mototest"),
		"a/tagged_test.go":                    "//go:build integration\n\npackage a\n" + imp("internal/local/mototest"),
		"a/both_test.go":                      "//go:build integration || !integration\n\npackage a\n" + imp("internal/local/demo"),
		"a/pure_test.go":                      "package a\n" + imp("internal/jitter"),
		"a/a.go":                              "package a\n" + imp("internal/local/mototest"),
		"internal/local/faultproxy/x_test.go": "package faultproxy_test\n" + imp("internal/local/faultproxy"),
		"internal/local/faultproxy/y_test.go": "package faultproxy_test\n" + imp("internal/local/motoserver"),
		"a/testdata/skipped_test.go":          "package a\n" + imp("internal/local/mototest"),
		"nested/go.mod":                       "module example.com/nested\n",
		"nested/other_test.go":                "package nested\n" + imp("internal/local/mototest"),
	}
	for name, text := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bad, tagged, err := scan(root, module)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"a/both_test.go imports " + module + "/internal/local/demo",
		"a/untagged_test.go imports " + module + "/internal/local/mototest",
		"internal/local/faultproxy/y_test.go imports " + module + "/internal/local/motoserver",
	}
	if strings.Join(bad, "\n") != strings.Join(want, "\n") || tagged != 1 {
		t.Errorf("flagged\n\t%s\n(%d tagged importers of mototest), want\n\t%s\n(1)", strings.Join(bad, "\n\t"), tagged, strings.Join(want, "\n\t"))
	}
}

// moduleRoot is the directory of the go.mod above the test's directory, and
// its module path.
func moduleRoot(t *testing.T) (dir, module string) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			for _, line := range strings.Split(string(data), "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
					return dir, strings.Trim(f[1], `"`)
				}
			}
			t.Fatalf("%s/go.mod names no module", dir)
		}
		if !errors.Is(err, fs.ErrNotExist) || filepath.Dir(dir) == dir {
			t.Fatalf("no go.mod above the test: %v", err)
		}
		dir = filepath.Dir(dir)
	}
}

// scan walks the module at root as the go command sees it (no testdata, no
// _ or . directories, no nested modules) and returns, sorted, each test file
// that a build without tags includes and that imports the local machinery
// other than its own package; and how many integration-only test files
// import mototest.
func scan(root, module string) (bad []string, tagged int, err error) {
	plain := build.Default // no build tags: what plain `go test` compiles
	plain.BuildTags = nil
	mototest := module + "/" + local + "mototest"
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); rel != "." && err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(d.Name(), "_test.go") {
			return nil
		}
		included, err := plain.MatchFile(filepath.Dir(p), d.Name())
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		own := module + "/" + path.Dir(rel)
		for _, spec := range f.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: import %s: %w", rel, spec.Path.Value, err)
			}
			switch {
			case !strings.HasPrefix(imp, module+"/"+local) || imp == own:
			case included:
				bad = append(bad, rel+" imports "+imp)
			case imp == mototest:
				tagged++
			}
		}
		return nil
	})
	return bad, tagged, err
}
