package dynalite

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMakefileInstallsThePinnedVersion: `make install-dynalite` (and
// .ci/run, which calls it) installs the version Binary accepts, in the
// directory Binary looks in.
func TestMakefileInstallsThePinnedVersion(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^DYNALITE_VERSION\s*=\s*(\S+)\s*$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("the Makefile sets no DYNALITE_VERSION")
	}
	if got := string(m[1]); got != Version {
		t.Errorf("Makefile's DYNALITE_VERSION = %s, package dynalite's Version = %s: make them equal", got, Version)
	}
	install := regexp.MustCompile(`(?m)^DYNALITE_INSTALL\s*=\s*(.+)$`).FindSubmatch(b)
	if install == nil {
		t.Fatal("the Makefile sets no DYNALITE_INSTALL")
	}
	want := strings.ReplaceAll(InstallCommand, "dynalite@"+Version, "dynalite@$(DYNALITE_VERSION)")
	if got := strings.TrimSpace(string(install[1])); got != want {
		t.Errorf("Makefile's DYNALITE_INSTALL = %q, want %q (InstallCommand, which a failing test prints)", got, want)
	}
}
