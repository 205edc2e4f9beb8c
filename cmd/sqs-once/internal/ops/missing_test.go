//go:build integration

package ops_test

import (
	"strings"
	"testing"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/internal/ops"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
)

func TestMissingResourcesAreNotFound(t *testing.T) {
	t.Parallel()
	base := mototest.URL(t) + "/123456789012/"
	for _, args := range [][]string{
		{"peek", "--operator-queue", base + "no-such-queue", "operator"},
		{"status", "--main-queue", base + "no-such-queue"},
		{"status", "--stack", "no-such-stack"},
	} {
		if r := run(t, runOpts{}, args...); r.code != ops.ExitNotFound {
			t.Errorf("sqs-once %s: exit %d, want %d", strings.Join(args, " "), r.code, ops.ExitNotFound)
		}
	}
	// A missing table is not a missing key (issue 32): its own code, on
	// every command that reads the table.
	for _, args := range [][]string{
		{"inspect", "--table", "no-such-table", "--key-prefix", "p", "k"},
		{"release", "--table", "no-such-table", "--key-prefix", "p", "k"},
		{"forget", "--yes", "--table", "no-such-table", "--key-prefix", "p", "k"},
		{"status", "--locks", "--table", "no-such-table", "--key-prefix", "p"},
	} {
		if r := run(t, runOpts{}, args...); r.code != ops.ExitNoTable || !strings.Contains(r.stderr, "table no-such-table") || !strings.Contains(r.stderr, "no such table") {
			t.Errorf("sqs-once %s: exit %d, want %d naming the table as missing", strings.Join(args, " "), r.code, ops.ExitNoTable)
		}
	}
}
