//go:build integration

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqs-once/sqs-once/internal/local/dynalite"
	"github.com/sqs-once/sqs-once/internal/local/dynamodblocal"
	"github.com/sqs-once/sqs-once/internal/local/mariaserver"
	"github.com/sqs-once/sqs-once/internal/local/pgserver"
)

// The integration tier needs every tool, so on a machine that runs it
// (CI's image) setup installs nothing: CI never reaches for pip or apt.
func TestSetupFindsEverythingWhereTheIntegrationTierRuns(t *testing.T) {
	root := filepath.Join("..", "..")
	python, err := readPins(root)
	if err != nil {
		t.Fatal(err)
	}
	f, err := probe(t.Context(), root, os.Getenv("PATH"), pgserver.DebianBinDir, mariaserver.DebianServerDir)
	if err != nil {
		t.Fatal(err)
	}
	pins := Pins{Requirements: Requirements, Python: python, Dynalite: dynalite.Version, DynamoDBLocal: dynamodblocal.Version}
	if p := NewPlan(Test, f, pins, Options{Pip: true}); !p.Empty() {
		var out bytes.Buffer
		p.Render(&out, true)
		t.Errorf("setup would act on a machine with every tool:\n%s", out.String())
	}
	// The versions CI runs are the pinned ones, exactly.
	for dist, pin := range python {
		if got := f.Python.Packages[dist]; got != pin {
			t.Errorf("python3 has %s %s; %s pins %s", dist, got, Requirements, pin)
		}
	}
}

// setup installs dynalite where, and at the version, the tests look for it.
// (Here, not in the hermetic tier: package dynalite is the local machinery's.)
func TestDynaliteInstallIsThePackagesCommand(t *testing.T) {
	if got := strings.Join(DynaliteInstall(dynalite.Version), " "); got != dynalite.InstallCommand {
		t.Errorf("setup runs %q, package dynalite says %q", got, dynalite.InstallCommand)
	}
}

// setup installs DynamoDB Local where, and at the version, the tests look
// for it, and the Java runtime the tests' failure names.
func TestDynamoDBLocalInstallIsThePackagesCommand(t *testing.T) {
	if got := strings.Join(DynamoDBLocalInstall(dynamodblocal.Version), " "); got != dynamodblocal.InstallCommand {
		t.Errorf("setup runs %q, package dynamodblocal says %q", got, dynamodblocal.InstallCommand)
	}
	if DynamoDBLocalPackage != dynamodblocal.Package || JavaPackage != dynamodblocal.JavaPackage {
		t.Errorf("setup installs %s and %s, package dynamodblocal names %s and %s", DynamoDBLocalPackage, JavaPackage, dynamodblocal.Package, dynamodblocal.JavaPackage)
	}
}

// makeCmd is make run in the module's root, with none of the settings of
// a make this test may run under (make test): its flags and variables.
func makeCmd(t *testing.T, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(t.Context(), "make", append([]string{"--no-print-directory", "-C", filepath.Join("..", "..")}, args...)...)
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "MAKEFLAGS", "MFLAGS", "GNUMAKEFLAGS", "MAKELEVEL", "SETUP_FLAGS", "DEMO_FLAGS", "BIN_DIR":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return cmd
}

// allowOnly is a directory holding links to the named commands of this
// machine and nothing else, for a PATH that hides the rest.
func allowOnly(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range names {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Fatalf("%s is not on PATH: %v", name, err)
		}
		if name == "python3" {
			// A pyenv shim finds its interpreter through pyenv on PATH:
			// link the interpreter itself.
			out, err := exec.Command(p, "-c", "import sys; print(sys.executable)").Output()
			if err != nil {
				t.Fatalf("python3: %v", err)
			}
			p = strings.TrimSpace(string(out))
		}
		if err := os.Symlink(p, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// `make demo` with moto_server hidden from PATH stops at its setup step,
// which says once what it installs (here a dry run: no network), before
// the demo starts anything.
func TestMakeDemoWithoutMotoServer(t *testing.T) {
	bin := allowOnly(t, "go", "make", "python3")
	// BIN_DIR: setup's binary goes to the test's directory, not the module's.
	cmd := makeCmd(t, "demo", "SETUP_FLAGS=-dry-run", "BIN_DIR="+t.TempDir())
	cmd.Env = append(cmd.Env, "PATH="+bin, "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("make demo succeeded without moto_server:\n%s", out)
	}
	text := string(out)
	if n := strings.Count(text, "moto_server"); n != 1 {
		t.Errorf("moto_server is named %d times, want once:\n%s", n, text)
	}
	for _, want := range []string{
		"setup (make demo) would install:\n  moto_server (into .venv, from requirements-dev.txt):\n",
		"    .venv/bin/python -m pip install -r requirements-dev.txt\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("make demo's output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "exit status") {
		t.Errorf("a second report of the failure:\n%s", text)
	}
	if strings.Contains(text, "sqs-once-local") {
		t.Errorf("the demo ran after its setup step failed:\n%s", text)
	}
}

// `make demo` and `make test` run setup first, with the Makefile's dynalite
// and DynamoDB Local versions.
func TestMakeRunsSetupFirst(t *testing.T) {
	// setup and the demo run from go's build cache (the Makefile's GO_EXE),
	// built in their module (local/); bin/ only where the cache keeps none.
	bin, err := filepath.Abs(filepath.Join("..", "..", "bin"))
	if err != nil {
		t.Fatal(err)
	}
	exe := func(pkg string) string {
		return "exe=$(go -C local run -exec /bin/echo " + pkg + ") && { [ -x \"$exe\" ] || exe=$(go -C local run -exec /bin/echo " + pkg + "); } && " +
			"{ [ -x \"$exe\" ] || { go -C local build -o " + bin + "/" + filepath.Base(pkg) + " " + pkg + " && exe=" + bin + "/" + filepath.Base(pkg) + "; }; } && "
	}
	setup := exe("./setup") + "\"$exe\" -dynalite " + dynalite.Version + " -dynamodb-local " + dynamodblocal.Version
	for target, want := range map[string][]string{
		"demo": {setup + " -for demo ", exe("./cmd/sqs-once-local") + "echo \"sqs-once-local \" && \"$exe\" "},
		"test": {setup + " -for test ", "bin/cfnlint-cached template.yaml"},
	} {
		out, err := makeCmd(t, "-n", target).CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s: %v\n%s", target, err, out)
		}
		lines := strings.Split(string(out), "\n")
		if lines[0] != want[0] || !strings.Contains(string(out), want[1]) {
			t.Errorf("make -n %s:\n%s\nwant first %q, then %q", target, out, want[0], want[1])
		}
	}
}
