// Command sqs-once-local runs the whole sqs-once pipeline on a local
// moto_server, or a workload against a deployed stack, and checks that every
// order's side effect happened exactly once and nothing was lost (with
// -target sqs: that every order was forwarded to a second queue exactly
// once, intact). It is what `make demo` runs; see local/demo and
// `sqs-once-local -help`. `sqs-once-local try Name=Value...` (what `make try`
// runs) deploys the template with those parameters in front of a stand-in
// consumer and queue, and runs the consumer and the stack's processor for
// real, each while its event source mapping is enabled, for the sqs-once
// CLI to try and cut over, until Ctrl-C.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sqs-once/sqs-once/local/demo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := demo.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
