// Command setup installs what `make demo` and `make test` need and the
// machine lacks, and says once, with the exact command, what only the user
// can install. Both make targets build and run it first (make setup, make
// setup-demo); when everything is there it prints nothing and takes a
// fraction of a second.
//
// What it installs: the Python tools (moto_server, cfn-lint, the SAM
// translator, the AWS CLI), with pip into .venv from requirements-dev.txt, which the
// Makefile puts first on PATH; spin, gcc, tmux, redis-server (the Redis
// store's tests), PostgreSQL 15 (the PostgreSQL store's), MariaDB
// (mariadb-server, the MySQL store's) and Java 17
// (openjdk-17-jre-headless, which runs DynamoDB Local) with apt-get when it
// runs as root (otherwise the message gives the sudo line); dynalite and
// DynamoDB Local (the npm package amplify-dynamodb-simulator, which ships
// DynamoDBLocal.jar), at the Makefile's versions, with npm into .tools.
// Node.js itself is the user's to install: distributions package versions
// too old for dynalite.
//
// The decisions are NewPlan's, a function of what probe finds (Facts), so
// they are tested without the machine; -dry-run prints the plan.
//
// Usage:
//
//	go -C local run ./setup [-for demo|test] [-dry-run] [-pip=false] [-dynalite VERSION] [-dynamodb-local VERSION] [-pgbin DIR] [-mariadbbin DIR]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sqs-once/sqs-once/internal/local/mariaserver"
	"github.com/sqs-once/sqs-once/internal/local/pgserver"
	"github.com/sqs-once/sqs-once/internal/local/proc"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main with its inputs and outputs: exit status 0 when Goal's tools
// are all there (after installing what setup could), 1 when something is
// missing (with -dry-run: would be installed), 2 on bad usage.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("setup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	goal := fs.String("for", string(Test), "what to set up for: demo (make demo) or test (make test, and everything)")
	dryRun := fs.Bool("dry-run", false, "print what would be installed and what to run, install nothing; exit status 1 when anything is missing")
	pip := fs.Bool("pip", true, "install missing Python tools with pip into .venv; false: report them with the command (CI, whose image has them)")
	dynalite := fs.String("dynalite", "", "the dynalite version make test installs into .tools (the Makefile's DYNALITE_VERSION)")
	dynamoDBLocal := fs.String("dynamodb-local", "", "the version of "+DynamoDBLocalPackage+" (DynamoDB Local) make test installs into .tools (the Makefile's DYNAMODB_LOCAL_VERSION)")
	shared := fs.Bool("shared-tools", true, "a clone without .tools links it to one copy of the npm tools in the user's cache directory (installed there once per machine and version); false: npm installs them into this clone's .tools")
	pgBin := fs.String("pgbin", pgserver.DebianBinDir, "where PostgreSQL's postgres is, besides PATH")
	mariaBin := fs.String("mariadbbin", mariaserver.DebianServerDir, "where MariaDB's mariadbd is, besides PATH")
	rootFlag := fs.String("root", "", "the repository's root (default: the nearest directory above the working directory whose go.mod is the product module's)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	g := Goal(*goal)
	if g != Demo && g != Test || fs.NArg() > 0 {
		fmt.Fprintf(stderr, "setup: -for is demo or test, and no arguments follow the flags (got -for %q %q)\n", *goal, fs.Args())
		return 2
	}
	if g == Test && (*dynalite == "" || *dynamoDBLocal == "") {
		fmt.Fprintln(stderr, "setup: -for test needs -dynalite VERSION and -dynamodb-local VERSION (the Makefile passes DYNALITE_VERSION and DYNAMODB_LOCAL_VERSION)")
		return 2
	}
	root := *rootFlag
	if root == "" {
		var err error
		if root, err = proc.RepoRoot(); err != nil {
			fmt.Fprintln(stderr, "setup:", err)
			return 2
		}
	}
	python, err := readPins(root)
	if err != nil {
		fmt.Fprintln(stderr, "setup:", err)
		return 2
	}
	pins := Pins{Requirements: Requirements, Python: python, Dynalite: *dynalite, DynamoDBLocal: *dynamoDBLocal}
	opts := Options{Pip: *pip}
	if g == Test && *shared {
		// No cache directory (no HOME): each clone installs its own.
		if cache, err := os.UserCacheDir(); err == nil {
			opts.SharedTools = filepath.Join(cache, "sqs-once", "tools", "dynalite-"+pins.Dynalite+"+"+DynamoDBLocalPackage+"-"+pins.DynamoDBLocal)
		}
	}

	plan, err := planFor(ctx, g, root, *pgBin, *mariaBin, pins, opts)
	if err != nil {
		fmt.Fprintln(stderr, "setup:", err)
		return 1
	}
	if plan.Empty() {
		return 0
	}
	if *dryRun {
		plan.Render(stdout, true)
		return 1
	}
	// What the steps install under .venv/bin must be found by the steps
	// that follow, as the Makefile's recipes find it.
	if err := os.Setenv("PATH", filepath.Join(root, Venv, "bin")+string(filepath.ListSeparator)+os.Getenv("PATH")); err != nil {
		fmt.Fprintln(stderr, "setup:", err)
		return 1
	}
	for _, s := range plan.Steps {
		fmt.Fprintf(stderr, "setup (make %s): installing %s\n", g, s.For)
		if s.Note != "" {
			fmt.Fprintf(stderr, "setup (make %s): note: %s\n", g, s.Note)
		}
		for _, c := range s.Cmds {
			fmt.Fprintf(stderr, "+ %s\n", shellLine(c))
			if err := runIn(ctx, root, c, stdout, stderr); err != nil {
				fmt.Fprintf(stderr, "setup (make %s): %s failed: %v\n", g, shellLine(c), err)
				plan.renderManual(stderr)
				return 1
			}
		}
	}
	if len(plan.Steps) > 0 {
		// Check what the steps did: an install that succeeded and left a
		// tool missing (a PATH the Makefile does not set) is named, once.
		after, err := planFor(ctx, g, root, *pgBin, *mariaBin, pins, opts)
		if err != nil {
			fmt.Fprintln(stderr, "setup:", err)
			return 1
		}
		for _, s := range after.Steps {
			fmt.Fprintf(stderr, "setup (make %s): still missing after the install: %s\n", g, s.For)
		}
		plan = after
	}
	plan.renderManual(stderr)
	if plan.Empty() {
		return 0
	}
	return 1
}

func planFor(ctx context.Context, g Goal, root, pgBin, mariaBin string, pins Pins, opts Options) (Plan, error) {
	facts, err := probe(ctx, root, os.Getenv("PATH"), pgBin, mariaBin)
	if err != nil {
		return Plan{}, err
	}
	facts.SharedDynalite = npmVersion(opts.SharedTools, "dynalite")
	facts.SharedDynamoDBLocal = npmVersion(opts.SharedTools, DynamoDBLocalPackage)
	return NewPlan(g, facts, pins, opts), nil
}

// runIn runs c in dir; a program named by a relative path (.venv/bin/python)
// is dir's.
func runIn(ctx context.Context, dir string, c []string, stdout, stderr io.Writer) error {
	name := c[0]
	if strings.ContainsRune(name, '/') && !filepath.IsAbs(name) {
		name = filepath.Join(dir, name)
	}
	cmd := exec.CommandContext(ctx, name, c[1:]...)
	cmd.Dir = dir
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	return cmd.Run()
}
