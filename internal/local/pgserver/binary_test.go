package pgserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMissingServerSaysHowToInstall: without initdb and postgres in any
// directory looked in, the error is the install command, which a test
// fails with.
func TestMissingServerSaysHowToInstall(t *testing.T) {
	empty := t.TempDir()
	_, err := findBinDir([]string{empty})
	if err == nil || !strings.Contains(err.Error(), InstallCommand) {
		t.Errorf("findBinDir of an empty directory returned %v; want an error with %q", err, InstallCommand)
	}
}

// TestBinDirNeedsBothPrograms: a directory with initdb alone is not the
// server's; one with both is.
func TestBinDirNeedsBothPrograms(t *testing.T) {
	half, both := t.TempDir(), t.TempDir()
	for _, f := range []string{filepath.Join(half, "initdb"), filepath.Join(both, "initdb"), filepath.Join(both, "postgres")} {
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got, err := findBinDir([]string{half, both})
	if err != nil || got != both {
		t.Errorf("findBinDir(initdb only, both) = %q, %v; want %q", got, err, both)
	}
}
