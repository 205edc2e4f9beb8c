package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// everyTool is what `make test` needs on PATH, as the probe names them.
var everyTool = []string{"python3", "moto_server", "cfn-lint", "aws", "spin", "gcc", "tmux", "redis-server", "postgres", "mariadbd", "java", "node", "npm", "apt-get"}

func runSetup(t *testing.T, m *machine, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	// Each clone's own .tools unless a test asks for the shared copy
	// (a later -shared-tools wins): the user's cache is not the test's.
	code = run(t.Context(), append([]string{"-root", m.root, "-dynalite", "4.0.0", "-dynamodb-local", "2.9.30", "-pgbin", m.root, "-mariadbbin", m.root, "-shared-tools=false"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

// The fast path: everything there, nothing said.
func TestRunSaysNothingWhereEverythingIs(t *testing.T) {
	m := newMachine(t, fullPython(), everyTool...)
	m.write(".tools/node_modules/dynalite/package.json", `{"version":"4.0.0"}`)
	m.write(".tools/node_modules/amplify-dynamodb-simulator/package.json", `{"version":"2.9.30"}`)
	for _, args := range [][]string{{"-for", "test"}, {"-for", "demo"}, {"-for", "test", "-dry-run"}} {
		if code, stdout, stderr := runSetup(t, m, args...); code != 0 || stdout != "" || stderr != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 0 and silence", args, code, stdout, stderr)
		}
	}
}

// The dry run of `make demo` with moto_server hidden from PATH: what it
// would install, moto_server named once, nothing installed.
func TestDryRunWithMotoServerHidden(t *testing.T) {
	m := newMachine(t, fullPython(), "python3")
	code, stdout, stderr := runSetup(t, m, "-for", "demo", "-dry-run")
	want := `setup (make demo) would install:
  moto_server (into .venv, from requirements-dev.txt):
    python3 -m venv .venv
    .venv/bin/python -m pip install -r requirements-dev.txt
`
	if code != 1 || stdout != want || stderr != "" {
		t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s\nwant exit 1 and:\n%s", code, stdout, stderr, want)
	}
	if _, err := os.Stat(filepath.Join(m.root, Venv)); !os.IsNotExist(err) {
		t.Errorf("the dry run made %s (%v)", Venv, err)
	}
}

// The run itself: the venv and pip (fakes here), dynalite and DynamoDB
// Local with npm, then a second look that finds everything, and exit 0.
func TestRunInstallsWhatIsMissing(t *testing.T) {
	m := newMachine(t, fullPython(), "python3", "spin", "gcc", "tmux", "redis-server", "postgres", "mariadbd", "java", "node", "npm")
	code, stdout, stderr := runSetup(t, m, "-for", "test")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"setup (make test): installing moto_server, cfn-lint, aws (into .venv, from requirements-dev.txt)\n" +
			"+ python3 -m venv .venv\n" +
			"+ .venv/bin/python -m pip install -r requirements-dev.txt\n",
		"setup (make test): installing dynalite 4.0.0 (into .tools)\n" +
			"setup (make test): note: " + DynaliteNote + "\n" +
			"+ npm install --prefix .tools --no-audit --no-fund --save-exact dynalite@4.0.0\n",
		"setup (make test): installing DynamoDB Local (amplify-dynamodb-simulator 2.9.30, into .tools)\n" +
			"setup (make test): note: " + DynamoDBLocalNote + "\n" +
			"+ npm install --prefix .tools --no-audit --no-fund --save-exact amplify-dynamodb-simulator@2.9.30\n",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "missing") {
		t.Errorf("reports something missing after installing it all:\n%s", stderr)
	}
	if stdout != "fake pip: installed\n" {
		t.Errorf("the install commands' own output: %q", stdout)
	}
	// Everything there now: the next run is the fast path.
	if code, stdout, stderr := runSetup(t, m, "-for", "test"); code != 0 || stdout+stderr != "" {
		t.Errorf("second run: exit %d, %q %q", code, stdout, stderr)
	}
}

// What only the user can install is said once, after what setup did, and
// fails the make target.
func TestRunLeavesTheRestToTheUserInOneMessage(t *testing.T) {
	m := newMachine(t, fullPython(), "python3", "moto_server", "cfn-lint", "aws", "spin", "gcc", "tmux", "redis-server", "postgres", "mariadbd", "java", "apt-get")
	code, stdout, stderr := runSetup(t, m, "-for", "test")
	want := "setup (make test): missing what only you can install; do this, then run make test again:\n" +
		"  node and npm (then make test installs dynalite 4.0.0 and DynamoDB Local, amplify-dynamodb-simulator 2.9.30): " + NodeHint + "\n"
	if code != 1 || stdout != "" || stderr != want {
		t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant exit 1 and:\n%s", code, stdout, stderr, want)
	}
}

func TestRunWithoutPip(t *testing.T) {
	m := newMachine(t, fullPython(), "python3")
	code, _, stderr := runSetup(t, m, "-for", "demo", "-pip=false")
	if code != 1 || !strings.Contains(stderr, "  moto_server: python3 -m venv .venv && .venv/bin/python -m pip install -r requirements-dev.txt\n") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(m.root, Venv)); !os.IsNotExist(err) {
		t.Errorf("-pip=false made %s (%v)", Venv, err)
	}
}

func TestRunUsage(t *testing.T) {
	m := newMachine(t, fullPython(), everyTool...)
	for _, args := range [][]string{{"-for", "prod"}, {"-for", "demo", "extra"}, {"-nope"}} {
		if code, _, stderr := runSetup(t, m, args...); code != 2 || stderr == "" {
			t.Errorf("%q: exit %d, stderr %q; want 2 and a reason", args, code, stderr)
		}
	}
	var out, errOut bytes.Buffer
	if code := run(t.Context(), []string{"-root", m.root, "-for", "test"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "-dynalite") {
		t.Errorf("-for test without -dynalite: exit %d, %q", code, errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run(t.Context(), []string{"-root", m.root, "-for", "test", "-dynalite", "4.0.0"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "-dynamodb-local") {
		t.Errorf("-for test without -dynamodb-local: exit %d, %q", code, errOut.String())
	}
	m.write(Requirements, "moto\n")
	if code, _, stderr := runSetup(t, m, "-for", "demo"); code != 2 || !strings.Contains(stderr, "not an exact pin") {
		t.Errorf("an unpinned requirement: exit %d, %q", code, stderr)
	}
}
