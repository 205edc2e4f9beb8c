//go:build integration

package pgserver_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/internal/local/pgserver"
)

// psql returns a function running one query with the psql program next
// to initdb and postgres, on dsn, and returning its trimmed, unaligned,
// tuples-only output. The test uses psql, not a driver, so that the
// root module requires no database driver.
func psql(t *testing.T) func(ctx context.Context, dsn, query string) (string, error) {
	t.Helper()
	bin, err := pgserver.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(bin, "psql")
	if fi, err := os.Stat(path); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		t.Fatalf("psql was not found in %s, next to initdb and postgres (%v): install it (as root) with `%s`, or run `make setup`", bin, err, pgserver.InstallCommand)
	}
	return func(ctx context.Context, dsn, query string) (string, error) {
		// -X: no ~/.psqlrc; -A -t: the bare value.
		cmd := exec.CommandContext(ctx, path, "-X", "-A", "-t", "-d", dsn, "-c", query)
		cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=10")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("psql -c %q: %w: %s", query, err, strings.TrimSpace(stderr.String()))
		}
		return strings.TrimSpace(string(out)), nil
	}
}

// TestStartAndStop: the server answers on its DSN, listens on loopback
// only, and Stop ends it and removes its directory.
func TestStartAndStop(t *testing.T) {
	query := psql(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := pgserver.Start(ctx, pgserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := s.Dir()
	t.Cleanup(s.Stop)
	if !strings.HasPrefix(s.Addr, "127.0.0.1:") {
		t.Errorf("Addr %q; want a loopback address", s.Addr)
	}
	out, err := query(ctx, s.DSN, "SELECT current_setting('server_version_num')::int")
	if err != nil {
		t.Fatalf("connect to %s: %v (log: %s)", s.DSN, err, s.Log())
	}
	version, err := strconv.Atoi(out)
	if err != nil {
		t.Fatalf("server_version_num %q: %v", out, err)
	}
	if version/10000 != 15 {
		t.Errorf("server_version_num %d; want PostgreSQL 15", version)
	}
	if fsync, err := query(ctx, s.DSN, "SHOW fsync"); err != nil || fsync != "off" {
		t.Errorf("fsync %q (%v); want off", fsync, err)
	}
	s.Stop()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("after Stop the directory %s is still there (%v)", dir, err)
	}
	if out, err := query(ctx, s.DSN, "SELECT 1"); err == nil {
		t.Errorf("after Stop the server still answers on %s (psql printed %q)", s.DSN, out)
	}
}
