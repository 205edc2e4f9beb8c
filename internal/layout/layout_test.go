package layout

import (
	"bufio"
	"bytes"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sqs-once/sqs-once"

// graph is the import graph `go list -deps` prints for patterns: each
// package with the packages it imports.
type graph map[string][]string

// listDeps runs `go list -deps` on patterns from the module's root, with
// env added to the go command's environment (GOOS, GOARCH) and tags.
func listDeps(t *testing.T, env []string, tags string, patterns ...string) graph {
	t.Helper()
	return listDepsIn(t, ".", env, tags, patterns...)
}

// listDepsIn is listDeps in the module at dir, relative to the
// repository's root (cmd/sqs-once, local).
func listDepsIn(t *testing.T, dir string, env []string, tags string, patterns ...string) graph {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	args := []string{"list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command(gobin, append(args, patterns...)...)
	cmd.Dir = filepath.Join("..", "..", filepath.FromSlash(dir))
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, stderr.Bytes())
	}
	g := graph{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 0 {
			g[fields[0]] = fields[1:]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return g
}

// chain is a shortest import path from one of roots to pkg, for the error
// message: which import to remove.
func (g graph) chain(roots []string, pkg string) []string {
	from := map[string]string{}
	queue := slices.Clone(roots)
	for _, r := range roots {
		from[r] = ""
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == pkg {
			var path []string
			for ; p != ""; p = from[p] {
				path = append(path, p)
			}
			slices.Reverse(path)
			return path
		}
		for _, next := range g[p] {
			if _, seen := from[next]; !seen {
				from[next] = p
				queue = append(queue, next)
			}
		}
	}
	return nil
}

// checkNone fails for every package of g that banned matches, with the
// import chain from roots that brings it in.
func checkNone(t *testing.T, g graph, roots []string, banned func(pkg string) bool, why string) {
	t.Helper()
	for _, pkg := range slices.Sorted(maps.Keys(g)) {
		if !banned(pkg) {
			continue
		}
		// One error per way in: not again for what a banned package
		// brings along.
		chain := g.chain(roots, pkg)
		if !slices.ContainsFunc(chain[:len(chain)-1], banned) {
			t.Errorf("%s: %s", why, strings.Join(chain, " imports "))
		}
	}
}

// under reports whether pkg is dir or a package below it.
func under(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

// TestShippedBinariesLeaveOutTheLocalMachinery: no package the Lambda
// functions or the CLI are built from is under internal/local (the server
// launchers the product's tests start, the fault proxy, the local event
// source mapping) or the local module (the demo, the local stack), or is
// the benchmarks' fake endpoint (internal/instantaws), as built for the
// host and as the Makefile builds the functions for Lambda.
func TestShippedBinariesLeaveOutTheLocalMachinery(t *testing.T) {
	t.Parallel()
	roots := []string{module + "/cmd/processor", module + "/cmd/dlq-replayer", module + "/cmd/sqs-once"}
	local := module + "/internal/local"
	for _, build := range []struct {
		env  []string
		tags string
	}{
		{nil, ""},
		{[]string{"GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0"}, "lambda.norpc"}, // the Makefile's LAMBDA_BUILD
	} {
		g := listDeps(t, build.env, build.tags, "./cmd/processor", "./cmd/dlq-replayer")
		// The CLI is a module of its own (cmd/sqs-once/go.mod).
		maps.Copy(g, listDepsIn(t, "cmd/sqs-once", build.env, build.tags, "."))
		for _, r := range roots {
			if _, ok := g[r]; !ok {
				t.Fatalf("go list did not list %s", r)
			}
		}
		checkNone(t, g, roots, func(pkg string) bool {
			return under(pkg, local) || under(pkg, module+"/local") || under(pkg, module+"/internal/instantaws")
		},
			"a shipped binary is built with the local machinery "+strings.Join(append(build.env, build.tags), " "))
	}
}

// targetClients are the SDK clients only a Target calls (Lambda, SNS,
// EventBridge) and CloudWatch's, whose metrics sqsonce writes as log lines.
var targetClients = []string{"lambda", "sns", "eventbridge", "cloudwatch"}

// isTargetClient reports whether pkg is one of targetClients' packages.
func isTargetClient(pkg string) bool {
	return slices.ContainsFunc(targetClients, func(c string) bool { return under(pkg, "github.com/aws/aws-sdk-go-v2/service/"+c) })
}

// TestSqsonceLinksNoTargetClient: package sqsonce brings in none of the
// SDK clients only a Target calls (Lambda, SNS, EventBridge) nor
// CloudWatch's, whose metrics it writes as log lines: they live in
// sqsonce/targets, which a program imports only to use a target.
func TestSqsonceLinksNoTargetClient(t *testing.T) {
	t.Parallel()
	root := module + "/sqsonce"
	g := listDeps(t, nil, "", "./sqsonce")
	if _, ok := g[root]; !ok {
		t.Fatalf("go list did not list %s", root)
	}
	checkNone(t, g, []string{root}, isTargetClient, "sqsonce links a client only a Target needs")
}

// TestLibraryProgramsLinkNoTargetClient: a program that uses only
// sqsonce.FromEnv with a Handler, or only Do (New), links none of the
// clients only a Target needs (testdata/handleronly, testdata/doonly), as
// built for the host and for Lambda: every client linked is binary size,
// and each client's package initialisation is init time in every cold start.
func TestLibraryProgramsLinkNoTargetClient(t *testing.T) {
	t.Parallel()
	programs := []string{"./internal/layout/testdata/handleronly", "./internal/layout/testdata/doonly"}
	var roots []string
	for _, p := range programs {
		roots = append(roots, module+strings.TrimPrefix(p, "."))
	}
	for _, build := range []struct {
		env  []string
		tags string
	}{
		{nil, ""},
		{[]string{"GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0"}, "lambda.norpc"},
	} {
		g := listDeps(t, build.env, build.tags, programs...)
		for _, r := range roots {
			if _, ok := g[r]; !ok {
				t.Fatalf("go list did not list %s", r)
			}
			// Each program on its own: one that links a client must not
			// hide behind the other.
			checkNone(t, g.reach(r), []string{r}, isTargetClient, "a program using only sqsonce links a client only a Target needs")
		}
	}
}

// reach is the part of g that root imports, directly or not.
func (g graph) reach(root string) graph {
	out := graph{}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if _, seen := out[p]; seen {
			continue
		}
		out[p] = g[p]
		queue = append(queue, g[p]...)
	}
	return out
}

// TestShippedPackagesLeaveOutTestSupport: no package a user imports or a
// binary is built from links the test support of internal/retrybudget
// (retrybudgettest, an HTTP client that sends nothing), the in-memory store
// or the conformance suite (dynamostore.Add stages writes in a memstore
// transaction through an interface, not an import).
func TestShippedPackagesLeaveOutTestSupport(t *testing.T) {
	t.Parallel()
	roots := []string{module + "/cmd/processor", module + "/cmd/dlq-replayer", module + "/cmd/sqs-once", module + "/sqsonce", module + "/sqsonce/targets",
		module + "/sqsonce/store/dynamostore", module + "/sqsonce/store/redisstore", module + "/sqsonce/store/pgstore"}
	g := listDeps(t, nil, "", "./cmd/processor", "./cmd/dlq-replayer", "./sqsonce", "./sqsonce/targets",
		"./sqsonce/store/dynamostore", "./sqsonce/store/redisstore", "./sqsonce/store/pgstore")
	// The CLI is a module of its own.
	maps.Copy(g, listDepsIn(t, "cmd/sqs-once", nil, "", "."))
	for _, r := range roots {
		if _, ok := g[r]; !ok {
			t.Fatalf("go list did not list %s", r)
		}
	}
	checkNone(t, g, roots, func(pkg string) bool {
		return under(pkg, module+"/internal/retrybudget/retrybudgettest") || under(pkg, module+"/sqsonce/store/memstore") || under(pkg, module+"/sqsonce/store/storetest")
	}, "a shipped package links test support")
}
