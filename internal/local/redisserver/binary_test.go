package redisserver_test

import (
	"strings"
	"testing"

	"github.com/sqs-once/sqs-once/internal/local/redisserver"
)

// TestMissingServerSaysHowToInstall: without redis-server on PATH the
// error is the install command, which a test fails with.
func TestMissingServerSaysHowToInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := redisserver.Binary("redis-server")
	if err == nil || !strings.Contains(err.Error(), redisserver.InstallCommand) {
		t.Errorf("Binary with an empty PATH returned %v; want an error with %q", err, redisserver.InstallCommand)
	}
}
