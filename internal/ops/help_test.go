package ops_test

import (
	"strings"
	"testing"

	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/ops"
)

func TestHelpHasExamples(t *testing.T) {
	t.Parallel()
	for _, command := range []string{"", "status", "inspect", "release", "forget", "peek", "redrive"} {
		args := []string{"--help"}
		if command != "" {
			args = []string{command, "--help"}
		}
		r := run(t, runOpts{}, args...)
		if r.code != ops.ExitOK || !strings.Contains(r.stdout, "Examples:\n  sqs-once "+command) {
			t.Errorf("sqs-once %s --help: exit %d, without examples", command, r.code)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"bogus"},
		{"inspect", "--stack"},
		{"inspect", "--table", "t", "--key-prefix", "p"},
		{"inspect", "--table", "t", "--key-prefix", "p", "a", "b"},
		{"release", "--no-such-flag", "k"},
		{"peek", "--max", "0", "--operator-queue", "http://127.0.0.1:1/q", "operator"},
		{"peek", "--max", "x", "operator"},
		{"redrive", "--operator-queue", "http://127.0.0.1:1/q"},
		{"redrive", "--from", "operator", "--operator-queue", "http://127.0.0.1:1/q"},
		{"redrive", "--from", "main", "--to", "main"},
		{"status", "extra"},
		{"inspect", "k"},
	} {
		r := run(t, runOpts{}, args...)
		if r.code != ops.ExitUsage || !strings.Contains(r.stderr, "--help") {
			t.Errorf("sqs-once %s: exit %d, want %d with a pointer to --help", strings.Join(args, " "), r.code, ops.ExitUsage)
		}
	}
}

func TestMissingResourcesAreNotFound(t *testing.T) {
	t.Parallel()
	base := mototest.URL(t) + "/123456789012/"
	for _, args := range [][]string{
		{"peek", "--operator-queue", base + "no-such-queue", "operator"},
		{"status", "--main-queue", base + "no-such-queue"},
		{"inspect", "--table", "no-such-table", "--key-prefix", "p", "k"},
		{"status", "--stack", "no-such-stack"},
	} {
		if r := run(t, runOpts{}, args...); r.code != ops.ExitNotFound {
			t.Errorf("sqs-once %s: exit %d, want %d", strings.Join(args, " "), r.code, ops.ExitNotFound)
		}
	}
}
