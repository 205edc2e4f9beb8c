//go:build integration

package main

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sqs-once/sqs-once/internal/version"
)

// TestInstalledCLIPrintsTheVersion builds the CLI as `make cli` and `go -C
// cmd/sqs-once install .` do, with no -ldflags, and runs the binary: the
// version it prints is compiled in, so a build from a clone says the
// release too, not "(devel)" or nothing.
func TestInstalledCLIPrintsTheVersion(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "sqs-once")
	// "go" from PATH: go test puts its own GOROOT/bin first there
	// (runtime.GOROOT is empty in a -trimpath build, as make test's are).
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.CommandContext(t.Context(), bin, "--version").Output()
	if want := "sqs-once version " + version.Version + "\n"; err != nil || string(out) != want {
		t.Errorf("bin/sqs-once --version: %q (%v); want %q", out, err, want)
	}
}
