// Command benchreport measures what sqs-once's client side costs and prints
// each figure next to its target (issue 24); `make bench` runs it. Every
// figure is taken for this tree and, in the same run on the same machine,
// for a baseline commit (-baseline, 8ee3409 by default; "" for none),
// extracted with `git archive` into a temporary directory, where the
// benchmark's files (overlay) are copied so that both trees run the same
// benchmark:
//
//   - per record (sqsonce's BenchmarkClient, against endpoints that answer at
//     once, package instantaws): time, bytes and allocations (the median of
//     -count runs), DynamoDB calls, CPU time (user+system of the benchmark's
//     process, the difference between a short and a long run divided by the
//     records between them, so start-up cancels out) and instructions
//     (valgrind's callgrind, the same difference; both count the fake
//     endpoint's serving too, which runs in the benchmark's process);
//   - the processor as deployed (cmd/processor, built as the Makefile builds
//     it, for this machine), started under the Lambda Runtime API emulator
//     (internal/local/lambdaruntime) without a target: the time from its
//     start to its first request for an event, and its peak RSS (getrusage's
//     maxrss) after 11 invocations of ten new records each, the median of
//     -starts starts;
//   - the bootstrap's size, stripped, for linux/arm64.
//
// With -markdown it prints the table of docs/benchmarks.md too.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/internal/instantaws"
	"github.com/sqs-once/sqs-once/internal/local/lambdaruntime"
)

// overlay are the files of the benchmark, copied from this tree into the
// baseline's: the same benchmark runs on both.
var overlay = []string{
	"sqsonce/client_bench_test.go",
	"internal/instantaws/doc.go",
	"internal/instantaws/instantaws.go",
}

// baselineOverlay are the files written into the baseline's tree only,
// each from its copy in local/benchreport/testdata/baseline: the parts of
// the benchmark that use the API, which changed since the baseline.
var baselineOverlay = []string{
	"sqsonce/client_bench_setup_test.go",
}

// cases are BenchmarkClient's sub-benchmarks.
var cases = []string{"new", "duplicate", "duplicate-warm", "failure"}

type options struct {
	baseline  string
	count     int
	benchtime string
	starts    int
	markdown  bool
}

func main() {
	var o options
	flag.StringVar(&o.baseline, "baseline", "8ee3409", "the commit to measure beside this tree (\"\" for none)")
	flag.IntVar(&o.count, "count", 3, "runs of each benchmark; the median is reported")
	flag.StringVar(&o.benchtime, "benchtime", "1s", "go test -benchtime of each benchmark run")
	flag.IntVar(&o.starts, "starts", 7, "starts of the processor for its init time and RSS; the median is reported")
	flag.BoolVar(&o.markdown, "markdown", false, "print the Markdown table of docs/benchmarks.md too")
	flag.Parse()
	if err := run(context.Background(), o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

// caseFigures is what one record of a case costs.
type caseFigures struct {
	ns, bytes, allocs, ddbCalls float64
	cpuNs, instructions         float64 // NaN when not measured
}

// figures are one tree's.
type figures struct {
	cases        map[string]caseFigures
	floorNs      float64 // one bare round trip (BenchmarkClientFloor)
	floorAllocs  float64
	initMs       float64
	rssMiB       float64
	bootstrapMiB float64
}

type tree struct {
	name, dir string
}

func run(ctx context.Context, o options, w io.Writer) error {
	top, err := output(ctx, "", "git", "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "sqsonce-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	trees := []tree{{name: "this tree", dir: strings.TrimSpace(top)}}
	if o.baseline != "" {
		dir := filepath.Join(tmp, "baseline")
		if err := extract(ctx, trees[0].dir, o.baseline, dir); err != nil {
			return err
		}
		trees = append([]tree{{name: o.baseline, dir: dir}}, trees...)
	}
	var all []figures
	for i, t := range trees {
		fmt.Fprintf(os.Stderr, "measuring %s (%s)\n", t.name, t.dir)
		f, err := measure(ctx, o, t, filepath.Join(tmp, strconv.Itoa(i)))
		if err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		all = append(all, f)
	}
	machine := describeMachine()
	printTable(w, machine, trees, all)
	if o.markdown {
		fmt.Fprintln(w)
		printMarkdown(w, machine, trees, all)
	}
	return nil
}

// extract writes commit's tree into dir, with the benchmark's files of top
// over it.
func extract(ctx context.Context, top, commit, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	archive := exec.CommandContext(ctx, "git", "archive", "--format=tar", commit)
	archive.Dir = top
	tar := exec.CommandContext(ctx, "tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	tar.Stdin = pipe
	var stderr bytes.Buffer
	archive.Stderr, tar.Stderr = &stderr, &stderr
	if err := tar.Start(); err != nil {
		return err
	}
	if err := archive.Run(); err != nil {
		return fmt.Errorf("git archive %s: %w: %s", commit, err, stderr.Bytes())
	}
	if err := tar.Wait(); err != nil {
		return fmt.Errorf("tar: %w: %s", err, stderr.Bytes())
	}
	for _, f := range overlay {
		b, err := os.ReadFile(filepath.Join(top, f))
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return err
		}
	}
	for _, f := range baselineOverlay {
		b, err := os.ReadFile(filepath.Join(top, "local/benchreport/testdata/baseline", filepath.Base(f)))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func measure(ctx context.Context, o options, t tree, tmp string) (figures, error) {
	f := figures{cases: map[string]caseFigures{}}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return f, err
	}
	testBin := filepath.Join(tmp, "sqsonce.test")
	if _, err := output(ctx, t.dir, "go", "test", "-c", "-o", testBin, "./sqsonce"); err != nil {
		return f, err
	}
	out, err := output(ctx, t.dir, testBin, "-test.run=^$", "-test.bench=^BenchmarkClient(Floor)?$", "-test.benchmem",
		"-test.benchtime="+o.benchtime, "-test.count="+strconv.Itoa(o.count))
	if err != nil {
		return f, err
	}
	results := parseBench(out)
	floor := results["BenchmarkClientFloor"]
	f.floorNs, f.floorAllocs = median(floor["ns/op"]), median(floor["allocs/op"])
	for _, c := range cases {
		r := results["BenchmarkClient/"+c]
		if len(r["ns/op"]) == 0 {
			return f, fmt.Errorf("no result for BenchmarkClient/%s in:\n%s", c, out)
		}
		cf := caseFigures{
			ns: median(r["ns/op"]), bytes: median(r["B/op"]), allocs: median(r["allocs/op"]),
			ddbCalls: median(r["ddb-calls/record"]), cpuNs: math.NaN(), instructions: math.NaN(),
		}
		// About two seconds of records between the short and the long run:
		// fewer, and a GC cycle more or less in one of the runs shows.
		if cf.cpuNs, err = cpuPerRecord(ctx, t.dir, testBin, c, max(1000, int(2e9/cf.ns))); err != nil {
			return f, err
		}
		if _, err := exec.LookPath("valgrind"); err == nil {
			// Under valgrind a record takes some 40 times longer: 500 new
			// records take about 10 s, and differ by about 3% run to run.
			if cf.instructions, err = instructionsPerRecord(ctx, t.dir, tmp, testBin, c, max(500, int(5e7/cf.ns))); err != nil {
				return f, err
			}
		}
		f.cases[c] = cf
	}
	processor := filepath.Join(tmp, "processor")
	if err := build(ctx, t.dir, processor, nil); err != nil {
		return f, err
	}
	if f.initMs, f.rssMiB, err = startProcessor(ctx, processor, o.starts); err != nil {
		return f, err
	}
	bootstrap := filepath.Join(tmp, "bootstrap")
	if err := build(ctx, t.dir, bootstrap, []string{"GOOS=linux", "GOARCH=arm64"}); err != nil {
		return f, err
	}
	st, err := os.Stat(bootstrap)
	if err != nil {
		return f, err
	}
	f.bootstrapMiB = float64(st.Size()) / (1 << 20)
	return f, nil
}

// build builds cmd/processor as the Makefile's LAMBDA_BUILD does, for the
// platform env names (this machine's when nil).
func build(ctx context.Context, dir, bin string, env []string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/processor")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0"), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/processor %v: %w\n%s", env, err, out)
	}
	return nil
}

// benchArgs runs BenchmarkClient's case c for exactly n records.
func benchArgs(c string, n int) []string {
	return []string{"-test.run=^$", "-test.bench=^BenchmarkClient$/^" + c + "$", "-test.benchtime=" + strconv.Itoa(n) + "x"}
}

// cpuPerRecord is the CPU time a record of case c costs: the difference
// between the process's user and system time for 100+records records and
// for 100.
func cpuPerRecord(ctx context.Context, dir, bin, c string, records int) (float64, error) {
	cpu := func(n int) (time.Duration, error) {
		cmd := exec.CommandContext(ctx, bin, benchArgs(c, n)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, out)
		}
		return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
	}
	short, err := cpu(100)
	if err != nil {
		return 0, err
	}
	long, err := cpu(100 + records)
	if err != nil {
		return 0, err
	}
	return float64(long-short) / float64(records), nil
}

// instructionsPerRecord is the instructions a record of case c costs, as
// callgrind counts them: the difference between 10+records records and 10.
func instructionsPerRecord(ctx context.Context, dir, tmp, bin, c string, records int) (float64, error) {
	count := func(n int) (float64, error) {
		file := filepath.Join(tmp, fmt.Sprintf("callgrind.%s.%d", c, n))
		// --fair-sched: valgrind runs one thread at a time, and its default
		// lock lets a spinning thread of the Go runtime keep it, so that on
		// an idle machine a run could spin for many minutes (seen: a 10-record
		// run past ten minutes that finished at once when another process
		// woke the machine). The fair lock hands it on in turn.
		args := append([]string{"--tool=callgrind", "--fair-sched=yes", "--callgrind-out-file=" + file, bin}, benchArgs(c, n)...)
		cmd := exec.CommandContext(ctx, "valgrind", args...)
		cmd.Dir = dir
		// callgrind asserts on the signals of Go's asynchronous preemption.
		cmd.Env = append(os.Environ(), "GODEBUG=asyncpreemptoff=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("valgrind %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return 0, err
		}
		for line := range strings.Lines(string(b)) {
			for _, prefix := range []string{"totals:", "summary:"} {
				if rest, ok := strings.CutPrefix(line, prefix); ok {
					return strconv.ParseFloat(strings.Fields(rest)[0], 64)
				}
			}
		}
		return 0, fmt.Errorf("%s: no totals line", file)
	}
	short, err := count(10)
	if err != nil {
		return 0, err
	}
	long, err := count(10 + records)
	if err != nil {
		return 0, err
	}
	return (long - short) / float64(records), nil
}

// parseBench reads `go test -bench` output: benchmark name (without the
// -GOMAXPROCS suffix) -> unit -> the values of each run.
func parseBench(out string) map[string]map[string][]float64 {
	res := map[string]map[string][]float64{}
	for line := range strings.Lines(out) {
		fields := strings.Fields(line)
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		name := fields[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		if res[name] == nil {
			res[name] = map[string][]float64{}
		}
		for i := 2; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err == nil {
				res[name][fields[i+1]] = append(res[name][fields[i+1]], v)
			}
		}
	}
	return res
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// startProcessor starts bin under the Runtime API emulator starts times,
// each with a fresh emulator and AWS endpoint, and returns the medians of
// the time from its start to its first request for an event and of its
// peak RSS after 11 invocations of ten new records.
func startProcessor(ctx context.Context, bin string, starts int) (initMs, rssMiB float64, _ error) {
	var inits, rsss []float64
	for i := range starts {
		init, rss, err := startOnce(ctx, bin, i)
		if err != nil {
			return 0, 0, err
		}
		inits = append(inits, init)
		rsss = append(rsss, rss)
	}
	return median(inits), median(rsss), nil
}

func startOnce(ctx context.Context, bin string, run int) (initMs, rssMiB float64, _ error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	aws := instantaws.Start()
	defer aws.Close()
	rt, err := lambdaruntime.Start("arn:aws:lambda:us-east-1:123456789012:function:processor")
	if err != nil {
		return 0, 0, err
	}
	defer rt.Close()
	// What Lambda sets, and the template's variables without a target;
	// nothing may reach AWS.
	env := []string{
		"AWS_LAMBDA_FUNCTION_NAME=processor", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=128", "AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"AWS_REGION=us-east-1", "AWS_DEFAULT_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=AKIDBENCH", "AWS_SECRET_ACCESS_KEY=bench-secret", "AWS_SESSION_TOKEN=bench-token",
		"AWS_EC2_METADATA_DISABLED=true", "AWS_ENDPOINT_URL=" + aws.URL(),
		"IDEMPOTENCY_TABLE=bench-table", "HOME=/nonexistent",
	}
	start := time.Now()
	p, err := rt.StartProcess(bin, env)
	if err != nil {
		return 0, 0, err
	}
	defer p.Kill()
	polled, err := rt.FirstPoll(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("no first poll: %w\n%s", err, p.Output())
	}
	for i := range 11 {
		var ev events.SQSEvent
		for j := range 10 {
			ev.Records = append(ev.Records, events.SQSMessage{
				MessageId: fmt.Sprintf("r%d-i%d-m%d", run, i, j), Body: `{"order":1}`,
				EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders",
				Attributes: map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": strconv.FormatInt(start.UnixMilli(), 10)},
			})
		}
		body, err := json.Marshal(ev)
		if err != nil {
			return 0, 0, err
		}
		res, err := p.Invoke(ctx, body, 30*time.Second)
		if err != nil {
			return 0, 0, fmt.Errorf("invocation %d: %w\n%s", i, err, p.Output())
		}
		var resp events.SQSEventResponse
		if res.Error != nil || json.Unmarshal(res.Payload, &resp) != nil || len(resp.BatchItemFailures) > 0 {
			return 0, 0, fmt.Errorf("invocation %d: %v %s\n%s", i, res.Error, res.Payload, p.Output())
		}
	}
	if got := aws.Calls(instantaws.UpdateItem); got != 11*10*2 {
		return 0, 0, fmt.Errorf("%d UpdateItem calls for 110 new records, want 220", got)
	}
	if err := p.Kill(); err != nil {
		return 0, 0, err
	}
	ru, ok := p.State().SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, 0, errors.New("no rusage for the processor")
	}
	// Linux reports maxrss in KiB.
	return float64(polled.Sub(start)) / 1e6, float64(ru.Maxrss) / 1024, nil
}

// describeMachine names the machine in neutral words: cores, CPU model, Go.
func describeMachine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%d cores, %s, %s %s/%s", runtime.NumCPU(), model, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// row is one figure of the report: its name, how to read it from a tree's
// figures, its unit's format and its target (nil: none) with the target's
// words.
type row struct {
	name   string
	value  func(f figures) float64
	format string
	target func(v, base float64) bool
	words  string
}

func rows() []row {
	var r []row
	r = append(r,
		row{"init: start to first /next (ms)", func(f figures) float64 { return f.initMs }, "%.1f", atMost(8), "<= 8 ms"},
		row{"peak RSS after 11 invocations (MiB)", func(f figures) float64 { return f.rssMiB }, "%.1f", atMost(16), "<= 16 MiB"},
		row{"bootstrap, linux/arm64, stripped (MiB)", func(f figures) float64 { return f.bootstrapMiB }, "%.2f", atMost(10), "<= 10 MiB"},
	)
	for _, c := range cases {
		cf := func(f figures) caseFigures { return f.cases[c] }
		calls := map[string]float64{"new": 2, "duplicate": 1, "duplicate-warm": 0, "failure": 2}[c]
		r = append(r,
			row{c + ": DynamoDB calls", func(f figures) float64 { return cf(f).ddbCalls }, "%.0f", equal(calls), fmt.Sprintf("= %.0f", calls)},
			row{c + ": time (µs)", func(f figures) float64 { return cf(f).ns / 1e3 }, "%.1f", nil, ""},
			row{c + ": CPU (µs)", func(f figures) float64 { return cf(f).cpuNs / 1e3 }, "%.1f", halfOrBetter(c), halfWords(c)},
			row{c + ": instructions (thousands)", func(f figures) float64 { return cf(f).instructions / 1e3 }, "%.0f", halfOrBetter(c), halfWords(c)},
			row{c + ": allocations", func(f figures) float64 { return cf(f).allocs }, "%.0f", allocTarget(c), allocWords(c)},
			row{c + ": bytes allocated (KB)", func(f figures) float64 { return cf(f).bytes / 1e3 }, "%.1f", bytesTarget(c), bytesWords(c)},
		)
	}
	r = append(r,
		row{"floor: one bare HTTP round trip (µs)", func(f figures) float64 { return f.floorNs / 1e3 }, "%.1f", nil, ""},
		row{"floor: its allocations", func(f figures) float64 { return f.floorAllocs }, "%.0f", nil, ""},
	)
	return r
}

func atMost(limit float64) func(v, _ float64) bool {
	return func(v, _ float64) bool { return v <= limit }
}

func equal(want float64) func(v, _ float64) bool { return func(v, _ float64) bool { return v == want } }

// halfOrBetter is the CPU and instruction target: of the cases with SDK
// work (the warm duplicate has none).
func halfOrBetter(c string) func(v, base float64) bool {
	if c == "duplicate-warm" {
		return nil
	}
	return func(v, base float64) bool { return !math.IsNaN(base) && v <= base/2 }
}

func halfWords(c string) string {
	if c == "duplicate-warm" {
		return ""
	}
	return "<= 1/2 of baseline"
}

func allocTarget(c string) func(v, _ float64) bool {
	if c != "new" {
		return nil
	}
	return atMost(600)
}

func allocWords(c string) string {
	if c != "new" {
		return ""
	}
	return "<= 600"
}

func bytesTarget(c string) func(v, _ float64) bool {
	if c != "new" {
		return nil
	}
	return atMost(60)
}

func bytesWords(c string) string {
	if c != "new" {
		return ""
	}
	return "<= 60 KB"
}

// verdict says whether the last tree meets the row's target.
func verdict(r row, trees []tree, all []figures) string {
	if r.target == nil {
		return ""
	}
	v := r.value(all[len(all)-1])
	base := math.NaN()
	if len(all) > 1 {
		base = r.value(all[0])
	}
	if math.IsNaN(v) {
		return "not measured"
	}
	if r.target(v, base) {
		return "met"
	}
	return "NOT MET"
}

func printTable(w io.Writer, machine string, trees []tree, all []figures) {
	fmt.Fprintf(w, "sqs-once client figures (issue 24), one run on %s\n\n", machine)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "figure\t")
	for _, t := range trees {
		fmt.Fprintf(tw, "%s\t", t.name)
	}
	fmt.Fprint(tw, "target\t\t\n")
	for _, r := range rows() {
		fmt.Fprintf(tw, "%s\t", r.name)
		for _, f := range all {
			fmt.Fprintf(tw, r.format+"\t", r.value(f))
		}
		fmt.Fprintf(tw, "%s\t%s\t\n", r.words, verdict(r, trees, all))
	}
	_ = tw.Flush()
}

func printMarkdown(w io.Writer, machine string, trees []tree, all []figures) {
	fmt.Fprintf(w, "Measured on %s.\n\n| figure |", machine)
	for _, t := range trees {
		fmt.Fprintf(w, " %s |", t.name)
	}
	fmt.Fprint(w, " target |\n|---|")
	for range trees {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprint(w, "---|\n")
	for _, r := range rows() {
		fmt.Fprintf(w, "| %s |", r.name)
		for _, f := range all {
			fmt.Fprintf(w, " "+r.format+" |", r.value(f))
		}
		words := r.words
		if v := verdict(r, trees, all); v != "" {
			words += " (" + strings.ToLower(v) + ")"
		}
		fmt.Fprintf(w, " %s |\n", words)
	}
}

// output runs name in dir and returns its standard output; an error carries
// its standard error.
func output(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s%s", name, strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return string(out), nil
}
