//go:build integration

package pgserver_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sqs-once/sqs-once/internal/local/pgserver"
)

// TestStartAndStop: the server answers on its DSN, listens on loopback
// only, and Stop ends it and removes its directory.
func TestStartAndStop(t *testing.T) {
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
	conn, err := pgx.Connect(ctx, s.DSN)
	if err != nil {
		t.Fatalf("connect to %s: %v (log: %s)", s.DSN, err, s.Log())
	}
	var version int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version/10000 != 15 {
		t.Errorf("server_version_num %d; want PostgreSQL 15", version)
	}
	var fsync string
	if err := conn.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err != nil || fsync != "off" {
		t.Errorf("fsync %q (%v); want off", fsync, err)
	}
	_ = conn.Close(ctx)
	s.Stop()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("after Stop the directory %s is still there (%v)", dir, err)
	}
	if c, err := pgx.Connect(ctx, s.DSN); err == nil {
		_ = c.Close(ctx)
		t.Errorf("after Stop the server still answers on %s", s.DSN)
	}
}
