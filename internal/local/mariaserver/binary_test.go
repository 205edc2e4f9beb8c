package mariaserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMissingServerSaysHowToInstall: without MariaDB's programs in any
// directory looked in, the error is the install command, which a test
// fails with.
func TestMissingServerSaysHowToInstall(t *testing.T) {
	empty := t.TempDir()
	_, err := findPrograms([]string{empty})
	if err == nil || !strings.Contains(err.Error(), InstallCommand) || !strings.Contains(err.Error(), "mariadbd") {
		t.Errorf("findPrograms of an empty directory returned %v; want an error naming mariadbd and %q", err, InstallCommand)
	}
}

// TestProgramsMayLiveApart: Debian puts mariadbd in /usr/sbin and the
// others in /usr/bin; each is found in the first directory that has it,
// and one missing is named.
func TestProgramsMayLiveApart(t *testing.T) {
	sbin, bin := t.TempDir(), t.TempDir()
	write := func(path string) {
		t.Helper()
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(sbin, "mariadbd"))
	write(filepath.Join(bin, "mariadb-install-db"))
	_, err := findPrograms([]string{sbin, bin})
	if err == nil || !strings.Contains(err.Error(), "MariaDB's mariadb not found") {
		t.Errorf("findPrograms without the client returned %v; want an error naming mariadb", err)
	}
	write(filepath.Join(bin, "mariadb"))
	got, err := findPrograms([]string{sbin, bin})
	want := Programs{Server: filepath.Join(sbin, "mariadbd"), InstallDB: filepath.Join(bin, "mariadb-install-db"), Client: filepath.Join(bin, "mariadb")}
	if err != nil || got != want {
		t.Errorf("findPrograms = %+v, %v; want %+v", got, err, want)
	}
}
