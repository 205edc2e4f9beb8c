package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The tests build a PATH of only the tools they allow: a directory of
// empty executables for the commands probe merely looks for, and links to
// this test binary for those it runs (python3, npm), which TestMain turns
// into fakes by the name they are called by. No tool of the machine runs,
// so the tier needs only Go.

// fakePythonEnv holds the JSON the fake python3 answers probe's script with.
const fakePythonEnv = "SETUP_TEST_PYTHON"

func TestMain(m *testing.M) {
	switch filepath.Base(os.Args[0]) {
	case "python3", "python":
		os.Exit(fakePython(os.Args[1:]))
	case "npm":
		os.Exit(fakeNPM(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakePython answers probe's script with $SETUP_TEST_PYTHON; -m venv makes
// a .venv whose python is this fake; -m pip install -r puts moto_server,
// cfn-lint and aws into .venv/bin.
func fakePython(args []string) int {
	switch {
	case len(args) >= 2 && args[0] == "-c" && args[1] == pythonScript:
		if !slices.Equal(args[2:], probedDists) {
			fmt.Fprintf(os.Stderr, "fake python3: asked about %q, want %q\n", args[2:], probedDists)
			return 3
		}
		fmt.Println(os.Getenv(fakePythonEnv))
		return 0
	case slices.Equal(args, []string{"-m", "venv", Venv}):
		self, err := os.Executable()
		if err == nil {
			err = os.MkdirAll(filepath.Join(Venv, "bin"), 0o755)
		}
		if err == nil {
			err = os.Symlink(self, filepath.Join(Venv, "bin", "python"))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake python3:", err)
			return 1
		}
		return 0
	case slices.Equal(args, []string{"-m", "pip", "install", "-r", Requirements}):
		// Run in the module's root, with the venv's own python.
		if _, err := os.Stat(Requirements); err != nil {
			fmt.Fprintln(os.Stderr, "fake pip:", err)
			return 1
		}
		if filepath.Base(filepath.Dir(filepath.Dir(os.Args[0]))) != Venv {
			fmt.Fprintln(os.Stderr, "fake pip: run by", os.Args[0], "not the venv's python")
			return 1
		}
		for _, c := range []string{"moto_server", "cfn-lint", "aws"} {
			if err := os.WriteFile(filepath.Join(Venv, "bin", c), nil, 0o755); err != nil {
				fmt.Fprintln(os.Stderr, "fake pip:", err)
				return 1
			}
		}
		fmt.Println("fake pip: installed")
		return 0
	}
	fmt.Fprintf(os.Stderr, "fake python3: unexpected arguments %q\n", args)
	return 2
}

// fakeNPM installs a package.json of the package (dynalite or DynamoDB
// Local's) and version asked for.
func fakeNPM(args []string) int {
	want := DynaliteInstall("")
	pkg, version, _ := strings.Cut(args[len(args)-1], "@")
	// The prefix (.tools, or the shared copy) is the third argument.
	if len(args) != len(want)-1 || len(args) < 3 || !slices.Equal(args[3:len(args)-1], want[4:len(want)-1]) || args[0] != "install" || args[1] != "--prefix" || pkg != "dynalite" && pkg != DynamoDBLocalPackage {
		fmt.Fprintf(os.Stderr, "fake npm: unexpected arguments %q\n", args)
		return 2
	}
	dir := filepath.Join(args[2], "node_modules", pkg)
	b, _ := json.Marshal(map[string]string{"version": version})
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 1
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), b, 0o644); err != nil {
		return 1
	}
	return 0
}

// machine is a module root and a PATH of fakes, for probe and run.
type machine struct {
	t    *testing.T
	root string // a module: go.mod and requirements-dev.txt
	bin  string // the only directory on PATH
}

// newMachine has the tools named and a python3 that answers with py.
func newMachine(t *testing.T, py *Python, tools ...string) *machine {
	t.Helper()
	m := &machine{t: t, root: t.TempDir(), bin: t.TempDir()}
	reqs, err := os.ReadFile(filepath.Join("..", "..", Requirements))
	if err != nil {
		t.Fatal(err)
	}
	m.write(Requirements, string(reqs))
	m.write("go.mod", "module example.com/m\n")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools {
		p := filepath.Join(m.bin, tool)
		switch tool {
		case "python3", "npm":
			err = os.Symlink(self, p)
		case "mkdir", "ln":
			// The machine's own: the shared copy's step runs them.
			var real string
			if real, err = exec.LookPath(tool); err == nil {
				err = os.Symlink(real, p)
			}
		default:
			err = os.WriteFile(p, nil, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if py != nil {
		b, err := json.Marshal(map[string]any{"major": py.Major, "minor": py.Minor, "ensurepip": py.Ensurepip, "packages": py.Packages})
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv(fakePythonEnv, string(b))
	}
	t.Setenv("PATH", m.bin)
	// A fake is this binary: built with -race, it would wait a second at
	// every exit for late reports (the race runtime's atexit_sleep_ms).
	t.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	return m
}

func (m *machine) write(name, content string) {
	m.t.Helper()
	p := filepath.Join(m.root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		m.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		m.t.Fatal(err)
	}
}

// fullPython is python3 with every pinned tool.
func fullPython() *Python {
	return &Python{Major: 3, Minor: 11, Ensurepip: true, Packages: maps.Clone(testPins.Python)}
}
