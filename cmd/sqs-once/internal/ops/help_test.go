package ops_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/internal/ops"
)

func TestHelpHasExamples(t *testing.T) {
	t.Parallel()
	for _, command := range []string{"", "status", "inspect", "release", "forget", "send-pending", "peek", "redrive", "preflight", "cutover"} {
		args := []string{"--help"}
		if command != "" {
			args = []string{command, "--help"}
		}
		r := run(t, runOpts{cfg: offline()}, args...)
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
		{"send-pending", "--table", "t", "--key-prefix", "p"},
		{"release", "--no-such-flag", "k"},
		{"peek", "--max", "0", "--operator-queue", "http://127.0.0.1:1/q", "operator"},
		{"peek", "--max", "x", "operator"},
		{"redrive", "--operator-queue", "http://127.0.0.1:1/q"},
		{"redrive", "--from", "operator", "--operator-queue", "http://127.0.0.1:1/q"},
		{"redrive", "--from", "main", "--to", "main"},
		{"status", "extra"},
		{"inspect", "k"},
	} {
		r := run(t, runOpts{cfg: offline()}, args...)
		if r.code != ops.ExitUsage || !strings.Contains(r.stderr, "--help") {
			t.Errorf("sqs-once %s: exit %d, want %d with a pointer to --help", strings.Join(args, " "), r.code, ops.ExitUsage)
		}
	}
}

// TestKeyPrefixTheProcessorRefuses: a --key-prefix that New would refuse
// names no record the processor writes, so the CLI refuses it as bad usage,
// naming the flag, before it loads any AWS configuration.
func TestKeyPrefixTheProcessorRefuses(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"a#b", "a b", "tab\there", "zero\u200bwidth"} {
		for _, command := range [][]string{{"inspect", "k"}, {"release", "--force", "k"}, {"forget", "--yes", "k"}, {"send-pending", "--yes", "k"}, {"status", "--locks"}} {
			args := append([]string{"--table", "t", "--key-prefix", prefix}, command...)
			var out, errOut strings.Builder
			code := ops.Main(context.Background(), args, ops.IO{
				Stdout: &out, Stderr: &errOut,
				LoadConfig: func(context.Context, string, string) (aws.Config, error) {
					t.Errorf("sqs-once %q loaded the AWS configuration", args)
					return *offline(), nil
				},
			})
			if code != ops.ExitUsage || !strings.Contains(errOut.String(), "--key-prefix") || !strings.Contains(errOut.String(), "--help") {
				t.Errorf("sqs-once %q: exit %d, want %d naming --key-prefix; stderr:\n%s", args, code, ops.ExitUsage, errOut.String())
			}
		}
	}
	// A prefix the processor takes passes the check: the command goes on
	// to read the table, which nothing answers here.
	if r := run(t, runOpts{cfg: offline()}, "inspect", "--table", "t", "--key-prefix", "orders-processor", "k"); r.code != ops.ExitError {
		t.Errorf("--key-prefix orders-processor: exit %d, want %d (the offline table unreachable)", r.code, ops.ExitError)
	}
}
