package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Exit statuses of the runner.
const (
	ExitOK        = 0
	ExitViolation = 1
	ExitUsage     = 2
)

// Main parses args, runs, prints the report (and with -json the summary on
// stdout) and returns the exit status. `try ...` runs Try instead.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if isTry(args) {
		return Try(ctx, args[1:], stdout, stderr)
	}
	opts, err := ParseFlags(args, stderr)
	if errors.Is(err, ErrHelp) {
		return ExitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "sqs-once-local:", err)
		return ExitUsage
	}
	sum, err := Run(ctx, opts, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "sqs-once-local:", err)
		return ExitUsage
	}
	report := stdout
	if opts.JSON {
		// stdout carries only the JSON, so it can be piped into jq.
		report = stderr
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(sum); err != nil {
			fmt.Fprintln(stderr, "sqs-once-local:", err)
			return ExitUsage
		}
	}
	fmt.Fprint(report, sum.Render())
	if !sum.OK {
		return ExitViolation
	}
	return ExitOK
}
