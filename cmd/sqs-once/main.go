// Command sqs-once is the operator's CLI for a deployed sqs-once stack:
// queue status, idempotency records (inspect, release, forget), peek and
// redrive. The commands live in internal/ops; see `sqs-once --help`.
//
// It is a module of its own, which takes the library from its clone (a
// replace in go.mod, so `go install ...@<version>` cannot build it until
// it is published): from a clone,
//
//	make cli                        # bin/sqs-once
//	go -C cmd/sqs-once install .    # sqs-once in GOBIN
//
// Either prints the release with --version: internal/version's constant,
// compiled in, not the VCS stamp a build may or may not carry.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/internal/ops"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first interrupt asks the command to stop cleanly (a redrive
	// finishes its batch in flight); a second one kills at once, as usual.
	context.AfterFunc(ctx, stop)
	code := ops.Main(ctx, os.Args[1:], ops.StdIO())
	stop()
	os.Exit(code)
}
