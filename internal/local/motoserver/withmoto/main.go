// Command withmoto runs a command with one moto_server for all of it: it
// starts moto_server (motoserver.Start: loopback, a free port, sqs-once's
// patches), runs the command with motoserver.SharedEnv set to the
// server's URL, and stops the server when the command ends. The test
// binaries the command starts (mototest.Main) then use that server instead
// of starting one each, which saves each of them moto's start-up (seconds
// of Python imports, on a machine where the tests compete for two cores).
//
// Usage:
//
//	withmoto command [argument...]
//
// The exit status is the command's. An interrupt or termination signal is
// passed on to the command, which withmoto then waits for; should withmoto
// itself be killed, the server dies with it (on Linux, proc's parent-death
// signal).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/sqs-once/sqs-once/internal/local/motoserver"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: withmoto command [argument...]")
		return 2
	}
	// Caught from the start, so that a signal during the server's start-up
	// still stops the server (below) rather than killing withmoto alone.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	// Lambda stays as moto_server starts it: the functions CloudFormation
	// creates (samstack's stacks) live in the default backend, which the
	// Docker-free one does not read; the packages that want the Docker-free
	// Lambda have servers of their own (mototest.MainPrivate).
	srv, err := motoserver.Start(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "withmoto: moto_server:", err)
		return 1
	}
	defer srv.Stop()
	select {
	case sig := <-sigs:
		fmt.Fprintln(os.Stderr, "withmoto:", sig)
		return 1
	default:
	}

	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), motoserver.SharedEnv+"="+srv.URL)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "withmoto:", err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case sig := <-sigs:
			// A terminal's Ctrl-C reaches the command too (one process
			// group); a signal sent to withmoto alone is passed on.
			_ = cmd.Process.Signal(sig)
		case err := <-done:
			var exit *exec.ExitError
			switch {
			case err == nil:
				return 0
			case errors.As(err, &exit) && exit.ExitCode() >= 0:
				return exit.ExitCode()
			default:
				fmt.Fprintln(os.Stderr, "withmoto:", err)
				return 1
			}
		}
	}
}
