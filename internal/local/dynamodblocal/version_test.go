package dynamodblocal

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMakefileInstallsThePinnedVersion: `make setup` (through local/setup,
// given DYNAMODB_LOCAL_VERSION) and `make install-dynamodb-local` install
// the release Jar accepts, in the directory Jar looks in.
func TestMakefileInstallsThePinnedVersion(t *testing.T) {
	// go test runs a package's tests in its directory, three below the
	// repository's root.
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^DYNAMODB_LOCAL_VERSION\s*=\s*(\S+)\s*$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("the Makefile sets no DYNAMODB_LOCAL_VERSION")
	}
	if got := string(m[1]); got != Version {
		t.Errorf("Makefile's DYNAMODB_LOCAL_VERSION = %s, package dynamodblocal's Version = %s: make them equal", got, Version)
	}
	install := regexp.MustCompile(`(?m)^DYNAMODB_LOCAL_INSTALL\s*=\s*(.+)$`).FindSubmatch(b)
	if install == nil {
		t.Fatal("the Makefile sets no DYNAMODB_LOCAL_INSTALL")
	}
	want := strings.ReplaceAll(InstallCommand, Package+"@"+Version, Package+"@$(DYNAMODB_LOCAL_VERSION)")
	if got := strings.TrimSpace(string(install[1])); got != want {
		t.Errorf("Makefile's DYNAMODB_LOCAL_INSTALL = %q, want %q (InstallCommand, which a failing test prints)", got, want)
	}
	// setup is given the version the Makefile pins.
	if !regexp.MustCompile(`(?m)^SETUP = .*-dynamodb-local \$\(DYNAMODB_LOCAL_VERSION\)`).Match(b) {
		t.Error("the Makefile's SETUP does not pass -dynamodb-local $(DYNAMODB_LOCAL_VERSION) to setup")
	}
}
