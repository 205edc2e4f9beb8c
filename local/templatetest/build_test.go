//go:build integration

package templatetest

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestBuildTargets runs the Makefile targets exactly as `sam build` does
// for BuildMethod: makefile (make build-<LogicalId> with ARTIFACTS_DIR set),
// then `make build`, the target for building without sam (both functions'
// bootstraps side by side), and checks each leaves a bootstrap that
// provided.al2023 on arm64 can run: a static, executable linux/arm64 ELF.
//
// The builds run one after another, so the later ones find the shared
// packages in the build cache: run side by side (they were two parallel
// tests with two parallel subtests), four cross-compiles of the AWS SDK
// from a cold cache, beside cfn-lint and four CPU hogs, outlasted a 5
// minute deadline in a loaded CI run. No deadline of their own: a compile
// is bounded by go test's -timeout.
func TestBuildTargets(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is not on PATH; install it (e.g. apt-get install make) to build the Lambda binaries")
	}
	for _, id := range []string{processorID, replayerID} {
		t.Run(id, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.CommandContext(t.Context(), "make", "--no-print-directory", "-C", root(t), "build-"+id, "ARTIFACTS_DIR="+dir)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("make build-%s: %v\n%s", id, err, out)
			}
			checkBootstrap(t, filepath.Join(dir, "bootstrap"))
		})
	}
	t.Run("make build", func(t *testing.T) {
		dir := t.TempDir()
		cmd := exec.CommandContext(t.Context(), "make", "--no-print-directory", "-C", root(t), "build", "BIN_DIR="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make build: %v\n%s", err, out)
		}
		for _, fn := range []string{"processor", "dlq-replayer"} {
			checkBootstrap(t, filepath.Join(dir, fn, "bootstrap"))
		}
	})
}

// checkBootstrap asserts what provided.al2023 on arm64 can run: a static,
// executable linux/arm64 ELF.
func checkBootstrap(t *testing.T, path string) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatalf("no bootstrap at %s: %v", path, err)
	}
	if info.Mode().Perm()&0o111 == 0 {
		t.Errorf("bootstrap is not executable: %v", info.Mode())
	}
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("bootstrap is not an ELF file: %v", err)
	}
	defer f.Close()
	if f.Machine != elf.EM_AARCH64 || f.Class != elf.ELFCLASS64 || f.Type != elf.ET_EXEC {
		t.Errorf("bootstrap is %v %v %v, want an arm64 64-bit executable", f.Machine, f.Class, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("bootstrap is dynamically linked; the Makefile should build with CGO_ENABLED=0")
		}
	}
}
