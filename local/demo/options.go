package demo

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Options are the runner's flags.
type Options struct {
	Keys           int
	DuplicateShare float64
	Poison         int
	Transient      int
	Permanent      int
	Crash          int
	Concurrency    int
	Seed           uint64
	JSON           bool
	Endpoint       string
	Stack          string
	Template       string
	// MaxReceiveCount and MaxAttempts are 0 and -1 for the template's values.
	MaxReceiveCount int
	MaxAttempts     int
	Visibility      time.Duration
	Wait            time.Duration
	Out             string
	// Keep keeps the temporary directory the run creates without Out (it
	// is removed at the end otherwise); a directory given by Out is kept.
	Keep    bool
	Verbose bool
	// Target is "" for the demo's business handler, or TargetSQS: the
	// processor forwards each key's message to a queue the demo creates.
	Target string
	// Tx writes the business handler's side effect as an item of a business
	// table, added to the transaction that records its key's completion
	// (dynamostore.Add on the store NewTransactional builds): exactly-once
	// effects.
	Tx bool
	// Emit is "" or a pipeline mode: EmitStaged (-emit) or EmitInline
	// (-emit-inline, the control). The business handler then hands an
	// OrderAccepted message to a second stage that ships the order.
	Emit string
	// FunctionTimeout is the processor's; below Lambda's 1 s minimum it is
	// applied locally only (the stack is deployed with 1 s).
	FunctionTimeout time.Duration
	// Chaos is "", ChaosLight or ChaosHeavy.
	Chaos string
}

// TargetSQS is -target sqs.
const TargetSQS = "sqs"

// Template defaults the demo deploys with when no flag overrides them.
//
// They are chosen for headroom on a busy laptop (two cores, four other
// CPU-bound processes): moto_server is Python, and under load an invocation
// of 10 records has been measured at up to about 2 s there (the report shows
// the longest one, and up to 5 s when other test suites ran too). A 10 s
// function timeout (one of the values the template allows) leaves room for
// that, so no invocation reaches its timeout unless a crash is injected. The
// lock is renewed every third of its 6 s while the handler runs, so a live
// invocation never loses it, and an abandoned one frees its key 6 s after
// its last renewal. Failed records come back after the failure backoff
// (1-2 s, then 2-4 s), not after the 10 s visibility timeout, and a
// maxReceiveCount of 3 sends a poison message to the DLQ in about 5 s: its
// third failure is not delayed (the template's default is 5 receives).
const (
	demoFunctionTimeout = 10 * time.Second
	demoLockTimeout     = 6 * time.Second
	demoBatchSize       = 10
	demoFailureBackoff  = 1
	demoMaxReceiveCount = 3
	// Two replays, not the template's three: each round through the DLQ
	// takes 5 to 10 s (backoff, replay delay, the pollers' latency), and a
	// third would make the poison messages' path outlast the rest of the
	// run.
	demoMaxAttempts = 2
	// Replay backoff for the demo: ceilings 2 and 4 s for replays 1 and 2.
	demoBackoffBase = 1
	demoBackoffRate = 2
	demoMaxDelay    = 4
	// Every key's sends reach an end well within this on a laptop; past it
	// the report counts what is still missing as lost.
	defaultLocalWait = 3 * time.Minute
)

// ErrHelp is returned by ParseFlags for -h/--help, after printing the usage.
var ErrHelp = flag.ErrHelp

// ParseFlags reads the command line; usage and errors go to stderr.
func ParseFlags(args []string, stderr io.Writer) (Options, error) {
	var o Options
	fs := flag.NewFlagSet("sqs-once-local", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.Keys, "n", 1000, "number of business keys (orders) in the workload")
	fs.Float64Var(&o.DuplicateShare, "dup", 0.2, "share of the normal keys a retrying producer sends 2 or 3 times, each time with a new messageId")
	fs.IntVar(&o.Poison, "poison", 3, "keys whose handler always fails: DLQ, every replay, then the operator queue")
	fs.IntVar(&o.Transient, "transient", 4, "keys that fail a few times, then succeed (half of them only after a replay)")
	fs.IntVar(&o.Permanent, "permanent", 2, "keys the handler rejects with sqsonce.Permanent: straight to the operator queue")
	fs.IntVar(&o.Crash, "crash", 0, "keys whose processor invocation hangs right after the side effect until the function timeout, as a crash between side effect and completion; shows the documented duplicate window")
	fs.IntVar(&o.Concurrency, "concurrency", 4, "concurrent pollers (invocations) on the main queue")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the run: the workload (keys, copies, order), the replay and failure backoff jitter, and the sequence of -chaos faults and crashes")
	fs.BoolVar(&o.JSON, "json", false, "print the machine-readable summary on stdout (the report goes to stderr)")
	fs.StringVar(&o.Endpoint, "endpoint", "", "URL of a moto_server already running, instead of starting one")
	fs.StringVar(&o.Stack, "stack", "", "name of a deployed sqs-once stack: send the workload to it with the usual AWS credentials and check what can be checked")
	fs.StringVar(&o.Template, "template", "template.yaml", "SAM template the local stack is created from")
	fs.IntVar(&o.MaxReceiveCount, "max-receive-count", 0, fmt.Sprintf("main queue maxReceiveCount (0: the demo's %d)", demoMaxReceiveCount))
	fs.IntVar(&o.MaxAttempts, "max-attempts", -1, fmt.Sprintf("replays of a dead letter before the operator queue (-1: the demo's %d)", demoMaxAttempts))
	fs.DurationVar(&o.Visibility, "visibility", 0, "visibility timeout set on the main queue after the local deploy (whole seconds, at least -function-timeout; 0: -function-timeout rounded up to a second); the DLQ keeps the template's")
	fs.DurationVar(&o.FunctionTimeout, "function-timeout", demoFunctionTimeout, "the processor's function timeout (100ms..60s); the lock timeout is three fifths of it. Below 1s (Lambda's minimum) it applies locally only: a way to see what a machine too slow for the timings does")
	fs.StringVar(&o.Chaos, "chaos", "", "\"light\" or \"heavy\": every AWS call of the pipeline goes through a fault-injecting proxy (500 before or after applying, connection reset after applying, throttling, latency) and some invocations crash after their side effect; the report lists the faults injected")
	fs.DurationVar(&o.Wait, "wait", 0, fmt.Sprintf("how long to wait, from the first send, for every message to reach an end (0: %s locally; with -stack, an estimate from the stack's timings plus 5m)", defaultLocalWait))
	fs.StringVar(&o.Out, "out", "", "directory for the ledger and the functions' logs, kept (default: a new temporary directory, removed at the end unless -keep)")
	fs.BoolVar(&o.Keep, "keep", false, "keep the temporary directory with the ledger and the functions' logs (without it the directory is removed at the end; -out's is always kept)")
	fs.BoolVar(&o.Verbose, "v", false, "send the functions' JSON logs to stderr as well")
	fs.BoolVar(&o.Tx, "tx", false, "transactional mode: the business handler's side effect is an item of a business table on moto_server, added with dynamostore.Add to the transaction that records its key's completion; the report counts the table's items per key (see above)")
	var emit, emitInline bool
	fs.BoolVar(&emit, "emit", false, "pipeline mode: the business handler also stages an OrderAccepted message with sqsonce.Emit to a second queue, sent after its completion commits; a second sqsonce processor keyed on the emit id ships each order, and the report counts the shipments per key (with -crash N, stage 1 crashes between its commit and its send)")
	fs.BoolVar(&emitInline, "emit-inline", false, "the control of -emit: the handler sends the OrderAccepted message itself, inside the handler, with an id of its own per run; -crash N then shows the duplicate shipments stage 2 gets")
	fs.StringVar(&o.Target, "target", "", "\"sqs\": the processor runs no handler but forwards each key's message to a second queue the demo creates (Target=sqs:<its URL>), and the report counts what arrived there per key (see above)")
	fs.Usage = func() {
		fmt.Fprint(stderr, usageHeader)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return Options{}, err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return Options{}, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	switch {
	case emit && emitInline:
		return Options{}, errors.New("-emit and -emit-inline: choose one (-emit-inline is -emit's control)")
	case emit:
		o.Emit = EmitStaged
	case emitInline:
		o.Emit = EmitInline
	}
	if o.Target != "" {
		if err := o.dropHandlerKeys(fs); err != nil {
			return Options{}, err
		}
	}
	if o.Visibility == 0 {
		o.Visibility = o.FunctionTimeout.Round(time.Second)
		if o.Visibility < o.FunctionTimeout {
			o.Visibility += time.Second
		}
	}
	if c, ok := chaosLevelOf(o.Chaos); ok && o.Target == "" && !isSet(fs, "crash") {
		o.Crash = c.crashes
	}
	return o, o.Validate()
}

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// lockTimeout is the processor's LOCK_TIMEOUT for this run: three fifths of
// the function timeout in whole seconds, at least 1 s. It is renewed every
// third of itself while the handler runs.
func (o Options) lockTimeout() time.Duration {
	return max(time.Second, (o.FunctionTimeout / time.Millisecond * demoLockTimeout / (demoFunctionTimeout / time.Millisecond)).Round(time.Second))
}

// deployedFunctionTimeout is what the template gets: whole seconds, at least
// Lambda's 1 s.
func (o Options) deployedFunctionTimeout() time.Duration {
	return max(time.Second, o.FunctionTimeout.Round(time.Second))
}

// The -function-timeout range: below 100ms nothing at all could run, and
// past a minute the demo would only be slow.
const (
	minFunctionTimeout = 100 * time.Millisecond
	maxFunctionTimeout = time.Minute
)

// handlerKeyFlags are the flags of keys whose behaviour the demo's business
// handler makes; with a target no handler runs.
var handlerKeyFlags = []string{"poison", "transient", "permanent", "crash"}

// dropHandlerKeys zeroes the handler's special keys for -target, whose
// defaults would otherwise ask for poison, transient and permanent keys,
// and refuses them when the command line asks for some explicitly: a
// target forwards whatever it is given, so nothing could make them fail.
func (o *Options) dropHandlerKeys(fs *flag.FlagSet) error {
	var set []string
	fs.Visit(func(f *flag.Flag) {
		if slices.Contains(handlerKeyFlags, f.Name) && f.Value.String() != "0" {
			set = append(set, "-"+f.Name)
		}
	})
	if len(set) > 0 {
		return fmt.Errorf("%s: no business handler runs with -target %s, so no key can be made to fail or crash; leave them out", strings.Join(set, ", "), o.Target)
	}
	o.Poison, o.Transient, o.Permanent, o.Crash = 0, 0, 0, 0
	return nil
}

const usageHeader = `Usage: sqs-once-local [flags]

Runs the whole sqs-once pipeline on a laptop: starts moto_server, creates the
queues and the table from template.yaml, runs the processor and the DLQ
replayer behind local event source mappings, sends a workload of orders with
duplicates, poison and transient failures, and prints a report that checks
every order's side effect happened exactly once and nothing was lost. It also
counts the healthy messages (of orders whose handler succeeds) that went
through the dead-letter queue, with 0 as the target: a broken invariant
without -chaos, a finding the report states under -chaos (an injected fault
can burn a receive) or with -max-receive-count/-max-attempts. Exit status 0
when every invariant holds, 1 when one is broken, 2 on bad usage or set-up
failure.

sqs-once-local try Target=lambda:FUNCTION ExistingQueueArn=ARN [Name=Value...]
instead deploys the template in front of a stand-in consumer and queue and
keeps it running for the sqs-once CLI (make try; sqs-once-local try -h).

With -target sqs the processor runs no handler: it forwards each key's
message once, body and attributes byte for byte, to a second queue the demo
creates (the template's Target parameter). The demo reads that queue as a
consumer would, and the report counts the arrivals per key: exactly once,
more than once, never arrived, intact. -poison, -transient, -permanent and
-crash mean nothing there: they default to 0 and cannot be set.

With -tx the side effect commits with the completion, in one DynamoDB
transaction (TransactWriteItems): the handler adds it with dynamostore.Add
as an item of a business table the demo creates beside the idempotency
table, and the report counts that table's items per key. A crash after the
side effect (-crash) is then a crash before the commit, which applies
nothing: the retry commits the effect once, and no key has more than one.
The ledger then lists the effects the handler staged, committed or not.

With -emit the business handler also stages an OrderAccepted message with
sqsonce.Emit to a second queue the demo creates: committed with its key's
completion, sent after it, relayed by the redelivery if the send did not
happen. A second sqsonce processor keyed on the emit id
(IDEMPOTENCY_KEY=attribute:sqs-once-emit-id) ships each order, and the
report counts the shipments per key. -crash N then crashes stage 1 between
its commit and its send: stage 2 still ships every order once.
-emit-inline is the control: the handler sends the message itself.

With -stack NAME it sends the same workload to a deployed stack instead and
checks what can be checked from outside (see the report's "not checked").

docs/demo.md explains the report line by line.

Flags:
`

// Validate explains flags that cannot work together.
func (o Options) Validate() error {
	var errs []error
	if o.Concurrency < 1 || o.Concurrency > 100 {
		errs = append(errs, fmt.Errorf("-concurrency %d: must be 1..100", o.Concurrency))
	}
	if o.MaxReceiveCount < 0 || o.MaxReceiveCount > 1000 {
		errs = append(errs, fmt.Errorf("-max-receive-count %d: must be 1..1000, or 0 for the template's", o.MaxReceiveCount))
	}
	if o.MaxAttempts < -1 || o.MaxAttempts > 100 {
		errs = append(errs, fmt.Errorf("-max-attempts %d: must be 0..100, or -1 for the template's", o.MaxAttempts))
	}
	if o.Visibility < time.Second || o.Visibility > 12*time.Hour || o.Visibility%time.Second != 0 {
		errs = append(errs, fmt.Errorf("-visibility %s: must be whole seconds, 1s..12h", o.Visibility))
	}
	if o.FunctionTimeout < minFunctionTimeout || o.FunctionTimeout > maxFunctionTimeout {
		errs = append(errs, fmt.Errorf("-function-timeout %s: must be %s..%s", o.FunctionTimeout, minFunctionTimeout, maxFunctionTimeout))
	} else if o.FunctionTimeout >= time.Second && o.FunctionTimeout%time.Second != 0 {
		errs = append(errs, fmt.Errorf("-function-timeout %s: Lambda takes whole seconds; below 1s any value is accepted (applied locally only)", o.FunctionTimeout))
	}
	if o.Visibility < o.FunctionTimeout {
		errs = append(errs, fmt.Errorf("-visibility %s: must be at least -function-timeout %s (Lambda refuses a shorter one)", o.Visibility, o.FunctionTimeout))
	}
	if _, ok := chaosLevelOf(o.Chaos); !ok && o.Chaos != "" {
		errs = append(errs, fmt.Errorf("-chaos %q: must be %q or %q (or left out)", o.Chaos, ChaosLight, ChaosHeavy))
	}
	if o.Chaos != "" && o.Stack != "" {
		errs = append(errs, errors.New("-chaos needs the local pipeline: it puts a fault-injecting proxy between the functions and moto_server"))
	}
	if o.Wait < 0 {
		errs = append(errs, fmt.Errorf("-wait %s: must not be negative", o.Wait))
	}
	if o.Tx && o.Stack != "" {
		errs = append(errs, errors.New("-tx needs the local pipeline: a deployed stack runs its own handler"))
	}
	if o.Tx && o.Target != "" {
		errs = append(errs, fmt.Errorf("-tx -target %s: no business handler runs, so it has no side effect to commit", o.Target))
	}
	if o.Emit != "" {
		flag := map[string]string{EmitStaged: "-emit", EmitInline: "-emit-inline"}[o.Emit]
		switch {
		case o.Stack != "":
			errs = append(errs, fmt.Errorf("%s needs the local pipeline: a deployed stack runs its own handler", flag))
		case o.Target != "":
			errs = append(errs, fmt.Errorf("%s -target %s: no business handler runs, so nothing emits", flag, o.Target))
		case o.Tx:
			errs = append(errs, fmt.Errorf("%s -tx: not combined yet; each shows its own window closed", flag))
		case o.Chaos != "":
			errs = append(errs, fmt.Errorf("%s -chaos: not combined yet: the report explains a second stage's duplicates by -crash only", flag))
		}
	}
	if o.Stack != "" && o.Crash > 0 {
		errs = append(errs, errors.New("-crash needs the local pipeline; a deployed stack runs its own handler"))
	}
	switch {
	case o.Target == "":
	case o.Target != TargetSQS:
		errs = append(errs, fmt.Errorf("-target %q: the demo knows \"sqs\" (forward to a queue it creates), or leave it out for the business-handler demo", o.Target))
	case o.Stack != "":
		errs = append(errs, errors.New("-target needs the local pipeline; a deployed stack has its own Target parameter"))
	case o.Poison+o.Transient+o.Permanent+o.Crash > 0:
		errs = append(errs, fmt.Errorf("-target %s: no business handler runs, so -poison, -transient, -permanent and -crash must be 0", o.Target))
	}
	if err := o.spec(1).Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// spec is the workload for a main queue with the given maxReceiveCount.
func (o Options) spec(maxReceiveCount int) WorkloadSpec {
	return WorkloadSpec{
		Keys:            o.Keys,
		DuplicateShare:  o.DuplicateShare,
		Poison:          o.Poison,
		Transient:       o.Transient,
		Permanent:       o.Permanent,
		Crash:           o.Crash,
		MaxReceiveCount: maxReceiveCount,
	}
}

// retriesOverridden reports whether the flags chose the retry budget rather
// than the template.
func (o Options) retriesOverridden() bool { return o.MaxReceiveCount > 0 || o.MaxAttempts >= 0 }

func (o Options) wait() time.Duration {
	if o.Wait > 0 {
		return o.Wait
	}
	return defaultLocalWait
}
