// Command cfnlint-cached lints CloudFormation templates with cfn-lint
// through the cache of clean verdicts the template tests use
// (internal/local/cfnlint): a template found clean before, with the same
// bytes, cfn-lint version and settings, is not linted again. make lint runs
// it on template.yaml:
//
//	go -C local run ./cmd/cfnlint-cached ../template.yaml
//
// It exits 0 when every template is clean, 1 when cfn-lint found something
// (printed, each line naming its template), 2 when it could not lint.
// SQS_ONCE_CFN_LINT_NO_CACHE=1 lints every template.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sqs-once/sqs-once/internal/local/cfnlint"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run lints the templates args names and says what it found.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, "usage: cfnlint-cached TEMPLATE...")
		return 2
	}
	// cfn-lint on a template of template.yaml's size takes seconds of CPU,
	// a minute on a busy machine: ten bound a hang, not a slow run.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	l, err := cfnlint.New(ctx)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	templates := make([]cfnlint.Template, len(args))
	for i, a := range args {
		templates[i] = cfnlint.Template{Name: a, Path: a}
	}
	verdicts, err := l.Lint(ctx, templates)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	code := 0
	for _, v := range verdicts {
		switch {
		case !v.Clean:
			fmt.Fprintln(stdout, v.Report)
			code = 1
		case v.Cached:
			fmt.Fprintf(stdout, "%s: clean (%s; found clean before, not linted again)\n", v.Template.Name, l.Version())
		default:
			fmt.Fprintf(stdout, "%s: clean (%s)\n", v.Template.Name, l.Version())
		}
		if v.KeepErr != nil {
			fmt.Fprintf(stderr, "%s: the cache did not keep its clean verdict: %v\n", v.Template.Name, v.KeepErr)
		}
	}
	return code
}
