package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/samstack"
	"github.com/sqs-once/sqs-once/internal/local/localesm"
	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/internal/replay"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

const (
	// The producer sends sendChunk messages at a time (senders batches side
	// by side) while fewer than maxBacklog of its messages are unresolved:
	// a steady rate rather than one burst, which also keeps moto_server's
	// per-receive scan of the queue short.
	sendChunk  = 40
	maxBacklog = 100
	// The late re-sends start when this share of the first wave has reached
	// an end, or this long after it was sent.
	lateWaveShare   = 0.8
	lateWaveMaxWait = 10 * time.Second
	// operatorTimeout is the demo operator's "function" timeout, within the
	// operator queue's default visibility timeout.
	operatorTimeout = 5 * time.Second
)

// Run runs the workload, locally or against opts.Stack, and returns the
// summary. progress receives the live progress line. An error means the run
// could not be set up or carried out; broken invariants are in the Summary.
func Run(ctx context.Context, opts Options, progress io.Writer) (Summary, error) {
	if opts.Stack != "" {
		return runStack(ctx, opts, progress)
	}
	return runLocal(ctx, opts, progress)
}

// runDir creates the directory for the ledger and the logs.
func runDir(opts Options) (string, error) {
	if opts.Out != "" {
		if err := os.MkdirAll(opts.Out, 0o755); err != nil {
			return "", fmt.Errorf("-out: %w", err)
		}
		return opts.Out, nil
	}
	return os.MkdirTemp("", "sqs-once-demo-")
}

// newRunID names a run: its stack, its queues and tables, its messages'
// bodies. Random, not the clock's milliseconds as it was: runs started side
// by side against one server (the package's tests do) must never share a
// stack name.
func newRunID() string {
	const ids = 36 * 36 * 36 * 36 * 36 * 36
	// At least 5 characters, as the clock's ids were, so that a run's
	// names keep their length.
	return strconv.FormatInt(36*36*36*36+rand.Int64N(ids-36*36*36*36), 36)
}

// localAWSConfig is an SDK configuration that can only reach the local
// server: static dummy credentials, the local endpoint, no instance metadata.
func localAWSConfig(ctx context.Context, endpoint string) (aws.Config, error) {
	if err := motoserver.ScrubEndpointOverrides(); err != nil {
		return aws.Config{}, err
	}
	return config.LoadDefaultConfig(ctx,
		// A profile's endpoint settings could point elsewhere: read none.
		config.WithSharedConfigFiles([]string{}),
		config.WithSharedCredentialsFiles([]string{}),
		config.WithRegion(motoserver.Region),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("testing", "testing", "testing")),
		config.WithBaseEndpoint(endpoint),
		config.WithEC2IMDSClientEnableState(imds.ClientDisabled),
	)
}

// demoParameters are the template parameters of the local stack: short
// timings so the whole pipeline, DLQ and replays included, runs in seconds.
func demoParameters(opts Options) map[string]string {
	p := map[string]string{
		"IdempotencyKey":     "body:/orderId",
		"ProcessorTimeout":   strconv.Itoa(int(opts.deployedFunctionTimeout() / time.Second)),
		"LockTimeout":        strconv.Itoa(int(opts.lockTimeout() / time.Second)),
		"ProcessorBatchSize": strconv.Itoa(demoBatchSize),
		"FailureBackoffBase": strconv.Itoa(demoFailureBackoff),
		"MaxReceiveCount":    strconv.Itoa(demoMaxReceiveCount),
		"MaxAttempts":        strconv.Itoa(demoMaxAttempts),
		"BackoffBase":        strconv.Itoa(demoBackoffBase),
		"BackoffRate":        strconv.Itoa(demoBackoffRate),
		"MaxDelay":           strconv.Itoa(demoMaxDelay),
		"Jitter":             "full",
	}
	if opts.MaxReceiveCount > 0 {
		p["MaxReceiveCount"] = strconv.Itoa(opts.MaxReceiveCount)
	}
	if opts.MaxAttempts >= 0 {
		p["MaxAttempts"] = strconv.Itoa(opts.MaxAttempts)
	}
	return p
}

// runLocal runs the demo in its directory (runDir). A temporary one is
// removed at the end, unless opts.Keep: nothing is left behind in the
// temporary directory, and the report then names no path of it.
func runLocal(ctx context.Context, opts Options, progressOut io.Writer) (Summary, error) {
	start := time.Now()
	return inRunDir(opts, func(dir string) (Summary, error) { return runLocalIn(ctx, opts, dir, start, progressOut) })
}

// inRunDir runs run in the run's directory (runDir), and removes it at the
// end when it is a temporary one that opts does not keep (no Out, no
// Keep): the summary then names no path in it, and says so (Removed).
func inRunDir(opts Options, run func(dir string) (Summary, error)) (Summary, error) {
	dir, err := runDir(opts)
	if err != nil {
		return Summary{}, err
	}
	if opts.Out != "" || opts.Keep {
		return run(dir)
	}
	defer os.RemoveAll(dir)
	sum, err := run(dir)
	sum.Ledger, sum.Logs, sum.Removed = "", "", true
	if sum.Stage2 != nil {
		sum.Stage2.Ledger = ""
	}
	return sum, err
}

// runLocalIn is runLocal in dir, the ledger's and the logs' directory.
func runLocalIn(ctx context.Context, opts Options, dir string, start time.Time, progressOut io.Writer) (Summary, error) {
	logPath := filepath.Join(dir, "functions.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return Summary{}, fmt.Errorf("create function log: %w", err)
	}
	defer logFile.Close()
	var logOut io.Writer = logFile
	if opts.Verbose {
		logOut = io.MultiWriter(logFile, progressOut)
	}
	fnLog := newFunctionLogger(logOut)
	runID := newRunID()
	stackName := "sqs-once-demo-" + runID
	params := demoParameters(opts)
	// The template's translation needs no server: it runs while the
	// moto_servers start (with -target the parameters wait for its queue).
	prepared := make(chan preparedStack, 1)
	if opts.Target == "" {
		go func() {
			p, err := samstack.Prepare(ctx, motoserver.Region, stackName, opts.Template, params)
			prepared <- preparedStack{p, err}
		}()
	}
	endpoint, partitionURLs, stop, err := localEndpoint(ctx, opts, progressOut)
	if err != nil {
		return Summary{}, err
	}
	// execute returns only once nothing polls the server any more, so
	// stopping it then strands no goroutine.
	defer stop()
	awsCfg, err := localAWSConfig(ctx, endpoint)
	if err != nil {
		return Summary{}, err
	}
	// The SDK's own warnings (a response body it could not drain when a call
	// was cancelled, retries) belong with the functions' logs, not on the
	// terminal between the progress line and the report.
	awsCfg.Logger = sdkLogger(fnLog)
	// The servers load each service's code while the template is still
	// being translated (warmUp); the deploy and the partitions' table wait
	// for it.
	warmCtx, stopWarming := context.WithCancel(ctx)
	defer stopWarming()
	mainWarm := warmUp(warmCtx, awsCfg)
	partsWarm := make([]<-chan struct{}, len(partitionURLs))
	for i, u := range partitionURLs {
		partsWarm[i] = warmUpDynamo(warmCtx, awsCfg, u)
	}

	api := sqs.NewFromConfig(awsCfg)
	var tq *targetQueue
	if opts.Target == TargetSQS {
		if tq, err = newTargetQueue(ctx, api, stackName); err != nil {
			return Summary{}, err
		}
		params["Target"] = tq.spec.String()
		fmt.Fprintf(progressOut, "created the target queue %s\n", tq.url)
		go func() {
			p, err := samstack.Prepare(ctx, motoserver.Region, stackName, opts.Template, params)
			prepared <- preparedStack{p, err}
		}()
	}
	fmt.Fprintf(progressOut, "creating stack %s from %s on %s...\n", stackName, opts.Template, endpoint)
	pr := <-prepared
	if pr.err != nil {
		return Summary{}, fmt.Errorf("create the stack from %s: %w", opts.Template, pr.err)
	}
	<-mainWarm
	info, err := deployLocal(ctx, awsCfg, api, opts, pr.p)
	if err != nil {
		return Summary{}, err
	}
	if tq != nil {
		if err := tq.checkDeployed(info, opts.Template); err != nil {
			return Summary{}, err
		}
	}
	w, err := NewWorkload(opts.spec(info.maxReceiveCount), opts.Seed, runID)
	if err != nil {
		return Summary{}, err
	}
	// The pipeline's calls (producer, event source mappings, functions) go
	// through the fault proxy with -chaos; the demo's own checks (queue
	// depths, the operator and target consumers) never do.
	var chaos *chaosLog
	if opts.Chaos != "" {
		chaos = newChaosLog()
		fmt.Fprintf(progressOut, "-chaos %s: the pipeline's AWS calls go through fault-injecting proxies\n", opts.Chaos)
	}
	pipeCfg, closeProxy, err := pipelineConfig(awsCfg, endpoint, opts, chaos, 0)
	if err != nil {
		return Summary{}, err
	}
	defer closeProxy()
	for _, w := range partsWarm {
		<-w
	}
	ddb, closeDynamo, err := partitionClients(ctx, awsCfg, info.table, partitionURLs, opts, chaos)
	if err != nil {
		return Summary{}, err
	}
	defer closeDynamo()
	pipe := sqs.NewFromConfig(pipeCfg)
	r := &localRun{
		opts: opts, info: info, api: api, pipe: pipe, ddb: ddb, w: w, tracker: NewTracker(), chaos: chaos,
		fnLog: fnLog, logPath: logPath, start: start,
		producer: &producer{
			api: pipe, url: info.mainURL, w: w, keys: w.KeyIndex(),
			body:  func(s Send, k Key) string { return w.Body(s, k.Kind, false) },
			attrs: func(Send) map[string]sqstypes.MessageAttributeValue { return nil },
		},
	}
	if tq != nil {
		// No handler, so no ledger: what arrives in the target queue is
		// the side effect.
		r.target, r.forwards, r.consumer = tq, NewForwardLog(), newTargetConsumer(api, tq.url)
		r.producer.attrs = targetAttributes
	} else {
		ledger, err := OpenLedger(filepath.Join(dir, "ledger.jsonl"))
		if err != nil {
			return Summary{}, err
		}
		defer ledger.Close()
		r.ledger, r.biz = ledger, NewBusiness(ledger, w)
		if opts.Tx {
			effects, err := newEffectTable(ctx, stackName+"-effects", effectServers(awsCfg, endpoint, partitionURLs))
			if err != nil {
				return Summary{}, err
			}
			r.effects, r.biz = effects, NewTransactionalBusiness(ledger, effects, w)
			fmt.Fprintf(progressOut, "-tx: each side effect commits with its completion, as an item of the business table %s\n", effects.name)
		}
		if opts.Emit != "" {
			if err := r.newStage2(ctx, dir, api, sqs.NewFromConfig(pipeCfg), stackName, runID); err != nil {
				return Summary{}, err
			}
			defer r.stage2.ships.Close()
			how := "staged with sqsonce.Emit, sent after the completion"
			if opts.Emit == EmitInline {
				how = "sent by the handler itself (the control)"
			}
			fmt.Fprintf(progressOut, "stage 2: OrderAccepted to the queue %s, %s; a second processor keyed on %s ships each order\n", r.stage2.name, how, sqsonce.AttrEmitID)
		}
	}
	mappings, err := r.mappings(pipeCfg)
	if err != nil {
		return Summary{}, err
	}
	return r.execute(ctx, mappings, progressOut)
}

// effectServers are direct clients of the servers that hold the idempotency
// table's items (the partitions, or the one server at endpoint): -tx's
// business table is created on each.
func effectServers(awsCfg aws.Config, endpoint string, partitions []string) []effectServer {
	if len(partitions) == 0 {
		partitions = []string{endpoint}
	}
	out := make([]effectServer, len(partitions))
	for i, u := range partitions {
		cfg := awsCfg.Copy()
		cfg.BaseEndpoint = aws.String(u)
		out[i] = dynamodb.NewFromConfig(cfg)
	}
	return out
}

// localEndpoint is -endpoint, or a moto_server started for this run, with
// stop to end it. partitions are the URLs of the servers that hold the
// idempotency table's items: with -endpoint that server alone, otherwise
// moto_servers of their own (see dynamoPartitions).
func localEndpoint(ctx context.Context, opts Options, progressOut io.Writer) (endpoint string, partitions []string, stop func(), err error) {
	if opts.Endpoint != "" {
		return opts.Endpoint, nil, func() {}, nil
	}
	// Asked once here: the servers below start side by side, and each
	// would report a missing moto_server.
	if _, err := motoserver.Find(); err != nil {
		return "", nil, nil, err
	}
	fmt.Fprintln(progressOut, "starting moto_server...")
	var partStop func()
	partsDone := make(chan error, 1)
	go func() {
		var err error
		partitions, partStop, err = startPartitions(ctx)
		partsDone <- err
	}()
	srv, err := motoserver.Start(ctx)
	if perr := <-partsDone; perr != nil || err != nil {
		if srv != nil {
			srv.Stop()
		}
		if partStop != nil {
			partStop()
		}
		return "", nil, nil, errors.Join(err, perr)
	}
	stop = func() {
		var wg sync.WaitGroup
		wg.Go(srv.Stop)
		partStop()
		wg.Wait()
	}
	// Anything that reads the environment (the SDK's defaults, the SAM
	// translator's subprocess) now reaches only this server, with dummy
	// credentials.
	if err := srv.SetProcessEnv(); err != nil {
		stop()
		return "", nil, nil, err
	}
	return srv.URL, partitions, stop, nil
}

// deployLocal creates the stack from the template with params (normally
// demoParameters), shortens the main queue's visibility timeout for the
// demo, and reads the stack back.
func deployLocal(ctx context.Context, awsCfg aws.Config, api *sqs.Client, opts Options, p *samstack.Prepared) (*stackInfo, error) {
	st, err := p.Deploy(ctx, awsCfg)
	if err != nil {
		return nil, fmt.Errorf("create the stack from %s: %w", opts.Template, err)
	}
	// The template ties each queue's visibility timeout to six times its
	// consumer's timeout plus the batching window (AWS's advice): for the
	// main queue 60 s, for the DLQ 180 s. A failed message would take that
	// long per receive to reach the DLQ, and a receive whose answer is lost
	// (-chaos) hides its messages that long. The demo sets both to
	// -visibility.
	for _, output := range []string{"MainQueueUrl", "DeadLetterQueueUrl"} {
		url, err := st.Output(output)
		if err != nil {
			return nil, err
		}
		if _, err := api.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{
			QueueUrl:   aws.String(url),
			Attributes: map[string]string{string(sqstypes.QueueAttributeNameVisibilityTimeout): strconv.Itoa(int(opts.Visibility / time.Second))},
		}); err != nil {
			return nil, fmt.Errorf("set the demo visibility timeout on %s: %w", url, err)
		}
	}
	info, err := loadStack(ctx, api, st)
	if err != nil {
		return nil, err
	}
	// Lambda's timeout is whole seconds, at least 1; a shorter
	// -function-timeout applies to the local invocations only. The replayer
	// runs within the DLQ's shortened visibility timeout, as Lambda would
	// require of it there.
	info.processor.Timeout = opts.FunctionTimeout
	info.replayer.Timeout = min(info.replayer.Timeout, opts.Visibility)
	return info, nil
}

// preparedStack is the template's translation, or why it failed.
type preparedStack struct {
	p   *samstack.Prepared
	err error
}

// localRun is one run of the workload through a local stack.
type localRun struct {
	opts Options
	info *stackInfo
	// api reaches moto_server directly: the demo's own checks. pipe is the
	// pipeline's client, through the fault proxy with -chaos.
	api, pipe queueAPI
	// ddb is the processor's DynamoDB client: the table's partitions, each
	// with its conditional writes atomic per item.
	ddb      txAPI
	chaos    *chaosLog
	w        Workload
	producer *producer
	// unsent are the sends drive has not sent (yet), by id.
	unsent  map[string]bool
	tracker *Tracker
	// ledger and biz are the business handler's; target, forwards and
	// consumer replace them with -target.
	ledger *Ledger
	biz    *Business
	// effects is -tx's business table: then the side effects committed
	// are its items, and the ledger lists those staged.
	effects *effectTable
	// stage2 is -emit's or -emit-inline's second stage.
	stage2   *pipeline
	target   *targetQueue
	forwards *ForwardLog
	consumer *targetConsumer
	fnLog    *slog.Logger
	logPath  string
	start    time.Time
	// sendStart is when drive began sending: -wait counts from there, so
	// a slow start-up (the stack's creation on a busy machine) does not
	// eat the time the messages get.
	sendStart time.Time
}

// queues are the queues the run waits to see empty: the stack's, and with
// -target the target queue its consumer reads.
func (r *localRun) queues() []string {
	urls := []string{r.info.mainURL, r.info.dlqURL, r.info.opURL}
	if r.target != nil {
		urls = append(urls, r.target.url)
	}
	if r.stage2 != nil {
		urls = append(urls, r.stage2.url)
	}
	return urls
}

// progress is the progress line's counters while the run goes on: with a
// target, "forwarded" is the keys the target queue accepted.
func (r *localRun) progress(elapsed time.Duration) Progress {
	p := r.tracker.Progress(r.w, elapsed)
	if r.target != nil {
		p.Processed, p.Forwarding = r.forwards.AcceptedKeys(), true
	}
	return p
}

// newReplayer builds the replayer's handler as cmd/dlq-replayer does, with
// its SQS client observed and its log lines in the run's function log.
func (r *localRun) newReplayer(awsCfg aws.Config) *replay.Handler {
	cfg := observeReplays(awsCfg, r.info.mainURL, r.tracker.Replayed)
	return replay.New(r.info.replayCfg, replay.Deps{SQS: sqs.NewFromConfig(cfg), Logger: r.fnLog, Rand: seededRand(r.opts.Seed, replaySeedStream)})
}

// mappings builds the three local event source mappings, none polling yet:
// the processor on the main queue, the replayer on the DLQ, and the demo's
// operator on the operator queue. execute checks them all before starting
// any, so a bad one stops the run with nothing half started.
func (r *localRun) mappings(awsCfg aws.Config) ([]*localesm.Mapping, error) {
	info := r.info
	// The processor as cmd/processor builds it, with the demo's business
	// handler, and a DynamoDB client whose conditional writes are atomic, as
	// DynamoDB's are (moto checks a condition and writes without a lock
	// between the two, and this demo races duplicates on purpose), and whose
	// completion writes are reported to the Tracker. With -target, the
	// target cmd/processor would build from the deployed TARGET takes the
	// business handler's place, its outcomes observed.
	ddb := newCompletionObserver(r.ddb, info.processorCfg.KeyPrefix, r.w, r.tracker.Completed)
	// The processor's log lines also feed the report's per-record counts.
	procLog := slog.New(newOutcomeCounter(r.fnLog.Handler(), r.tracker.Outcome))
	cfg := info.processorCfg
	cfg.Store = dynamostore.New(ddb, info.table)
	if r.effects != nil {
		cfg.Store = dynamostore.NewTransactional(ddb, info.table)
	}
	// The processor's SQS calls (operator queue, failure backoff, the queue
	// check) are the pipeline's: through the fault proxy with -chaos.
	cfg.AWS, cfg.Logger, cfg.Test.Rand = awsCfg, procLog, seededRand(r.opts.Seed, backoffSeedStream)
	// Its metrics, as the deployed function writes them, feed the report's
	// InProgressHidden count.
	cfg.Metrics = processorMetrics{hidden: r.tracker.InProgressHidden}
	if r.stage2.crashesInSend() {
		// Emits go out after the commit, on the pipeline's client; a
		// crash key's first send hangs, as a kill after the commit would.
		cfg.Sender = &crashingSender{next: targets.NewSender(awsCfg), pipe: r.stage2, release: r.biz.release}
	}
	var handler sqsonce.Handler
	if r.target != nil {
		tg, err := newObservedTarget(awsCfg, info, r.forwards, procLog)
		if err != nil {
			return nil, err
		}
		cfg.Target = tg
	} else {
		handler = r.biz.Handle
	}
	proc, err := sqsonce.NewConsumer(cfg, handler)
	if err != nil {
		return nil, err
	}

	procCfg := esmConfig(info.processor, info.processorESM, info.mainURL, r.opts.Concurrency)
	procCfg.OnInvoke, procCfg.Logger = r.tracker.MainInvocation, procLog
	repCfg := esmConfig(info.replayer, info.replayerESM, info.dlqURL, 2)
	repCfg.OnInvoke, repCfg.Logger = r.tracker.DeadLetterInvocation, r.fnLog
	opCfg := localesm.Config{QueueURL: info.opURL, FunctionName: "operator", Pollers: 1, Timeout: operatorTimeout, Logger: r.fnLog}

	var out []*localesm.Mapping
	for _, m := range []struct {
		cfg localesm.Config
		h   localesm.Handler
	}{
		{procCfg, proc.Handle},
		{repCfg, r.newReplayer(awsCfg).Handle},
		{opCfg, operatorHandler(r.tracker, r.w)},
	} {
		api := r.pipe
		if m.cfg.FunctionName == opCfg.FunctionName {
			api = r.api // the demo's operator is an observer, not the pipeline
		}
		esm, err := localesm.New(api, m.cfg, m.h)
		if err != nil {
			return nil, err
		}
		out = append(out, esm)
	}
	if r.stage2 != nil {
		esm, err := r.stage2Mapping(awsCfg)
		if err != nil {
			return nil, err
		}
		out = append(out, esm)
	}
	return out, nil
}

// execute checks and starts the mappings, drives the workload through them,
// stops them and evaluates the run. It returns only once every mapping, and
// every invocation they started, has stopped.
func (r *localRun) execute(ctx context.Context, mappings []*localesm.Mapping, progressOut io.Writer) (Summary, error) {
	for _, m := range mappings {
		if err := m.Check(ctx); err != nil {
			return Summary{}, err
		}
	}
	pollCtx, stopPolling := context.WithCancel(ctx)
	defer stopPolling()
	var running sync.WaitGroup
	runErrs := make(chan error, len(mappings))
	for _, m := range mappings {
		running.Go(func() {
			if err := m.Run(pollCtx); err != nil {
				runErrs <- err
				stopPolling()
			}
		})
	}
	if r.consumer != nil {
		running.Go(func() { r.consumer.consume(pollCtx) })
	}

	fmt.Fprintf(progressOut, "sending %s for %s...\n", count(len(r.w.Sends), "message"), count(len(r.w.Keys), "key"))
	prog := newProgressWriter(progressOut)
	// On every way out, what follows the progress line starts on a line of
	// its own.
	defer prog.Done()
	waitErr := r.drive(pollCtx, prog)
	// Crashed invocations hang until released; the mappings wait for them.
	if r.biz != nil {
		r.biz.Release()
	}
	stopPolling()
	running.Wait()
	close(runErrs)
	var mappingErr error
	for err := range runErrs {
		mappingErr = errors.Join(mappingErr, err)
	}
	switch {
	case mappingErr != nil:
		return Summary{}, mappingErr
	case waitErr != nil && ctx.Err() != nil:
		return Summary{}, waitErr
	}
	sum, err := r.evaluate(context.WithoutCancel(ctx))
	if err != nil {
		return Summary{}, err
	}
	if waitErr != nil {
		sum.Violations = append(sum.Violations, waitErr.Error())
		sum.OK = false
	}
	// The last progress line comes after the pipeline stopped, from the
	// report's own counts: what it says, the report says too.
	prog.Update(sum.Progress(), time.Now(), true)
	return sum, nil
}

// evaluate reads the ledger file and the queues' depths and checks the run.
func (r *localRun) evaluate(ctx context.Context) (Summary, error) {
	if r.target != nil {
		return r.evaluateTarget(ctx)
	}
	left, err := r.info.leftInQueues(ctx, r.api)
	if err != nil {
		return Summary{}, err
	}
	if err := r.ledger.Close(); err != nil {
		return Summary{}, err
	}
	entries, err := ReadLedger(r.ledger.Path())
	if err != nil {
		return Summary{}, err
	}
	var staged []Entry
	if r.effects != nil {
		// The effects are what the business table holds: the ledger
		// lists those the handler staged, committed or not.
		staged = entries
		if entries, err = r.effects.read(ctx); err != nil {
			return Summary{}, err
		}
	}
	obs := r.observed()
	obs.Left = left
	obs.Elapsed = time.Since(r.start)
	obs.Unsent = r.unsent
	ev := Evaluation{
		Mode:            "local",
		Seed:            r.opts.Seed,
		Timings:         r.info.timings(),
		LockHold:        r.info.lockHold(),
		RetriesOverride: r.opts.retriesOverridden(),
		Ceiling:         r.info.ceiling,
		Ledger:          r.ledger.Path(),
		Logs:            r.logPath,
	}
	if r.effects != nil {
		ev.Transactional = &Transactional{Table: r.effects.name, Staged: staged}
	}
	if r.stage2 != nil {
		if ev.Stage2, err = r.stage2.evaluation(); err != nil {
			return Summary{}, err
		}
	}
	sum := Summarize(r.w, entries, obs, ev)
	sum.Adaptations = r.info.adaptations
	return sum, nil
}

// observed is the tracker's snapshot with what -chaos injected.
func (r *localRun) observed() Observed {
	obs := r.tracker.Snapshot()
	if r.chaos == nil {
		return obs
	}
	obs.Chaos = r.chaos.stats(r.opts.Chaos, r.opts.Crash)
	obs.FaultedCompletions = map[string]bool{}
	for _, k := range r.w.Keys {
		if r.chaos.hitCompletion(store.RecordID(r.info.processorCfg.KeyPrefix, k.ID)) {
			obs.FaultedCompletions[k.ID] = true
		}
	}
	obs.FaultedInvocations = map[string]bool{}
	for id := range obs.Invocations {
		if r.chaos.hitInvocation(id) {
			obs.FaultedInvocations[id] = true
		}
	}
	return obs
}

// drive sends the workload at a steady pace, the late re-sends once most of
// the first wave is done, and shows progress until every send has reached
// an end and the queues are empty, or -wait has passed since the first send.
func (r *localRun) drive(ctx context.Context, prog *progressWriter) error {
	wait := r.opts.wait()
	r.sendStart = time.Now()
	ctx, cancel := context.WithDeadline(ctx, r.sendStart.Add(wait))
	defer cancel()
	var wave0, late []Send
	r.unsent = map[string]bool{}
	for _, s := range r.w.Sends {
		r.unsent[s.ID] = true
		if s.Wave == 0 {
			wave0 = append(wave0, s)
		} else {
			late = append(late, s)
		}
	}
	pending, sent := wave0, make([]Send, 0, len(r.w.Sends))
	var wave0Sent, lastDrainCheck time.Time
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		now := time.Now()
		p := r.progress(now.Sub(r.start))
		prog.Update(p, now, false)
		switch {
		case len(pending) > 0:
			if len(sent)-r.tracker.Resolved(sent) > maxBacklog {
				break
			}
			chunk := pending[:min(sendChunk, len(pending))]
			ids, err := r.producer.send(ctx, chunk)
			if err != nil && ctx.Err() == nil {
				return err
			}
			for _, snd := range chunk {
				if _, ok := ids[snd.ID]; ok {
					sent = append(sent, snd)
					delete(r.unsent, snd.ID)
				}
			}
			pending = pending[len(chunk):]
			continue
		case len(late) > 0:
			// A producer whose acknowledgement got lost re-sends later, when
			// the first copy has usually been processed.
			if wave0Sent.IsZero() {
				wave0Sent = now
			}
			if float64(r.tracker.Resolved(wave0)) >= lateWaveShare*float64(len(wave0)) || now.Sub(wave0Sent) >= lateWaveMaxWait {
				pending, late = late, nil
				continue
			}
		case p.Resolved == p.Sent && now.Sub(lastDrainCheck) >= 500*time.Millisecond:
			lastDrainCheck = now
			if drained(ctx, r.api, r.queues()...) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			p := r.progress(time.Since(r.start))
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("gave up after %s: %d of %s reached an end (%d of them never sent); -wait gives the messages more time", wait, p.Resolved, count(p.Sent, "message"), len(r.w.Sends)-len(sent))
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// operatorHandler plays the operator of the local stack: it records every
// message that reaches the operator queue, with its reason, and deletes it.
func operatorHandler(t *Tracker, w Workload) localesm.Handler {
	keyOf := map[string]string{}
	for _, s := range w.Sends {
		keyOf[s.ID] = s.Key
	}
	return func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		for _, rec := range ev.Records {
			if a, ok := arrival(w.RunID, keyOf, rec.MessageId, rec.Body, stringAttr(rec, sqsmsg.AttrReason), stringAttr(rec, sqsmsg.AttrReplayCount)); ok {
				t.AtOperator(a)
			} else {
				t.Foreign(rec.MessageId)
			}
		}
		return events.SQSEventResponse{}, nil
	}
}

// arrival reads an operator queue message; ok is false for a message that is
// not part of this run.
func arrival(runID string, keyOf map[string]string, messageID, body, reason, replayCount string) (Arrival, bool) {
	b, err := ParseBody(body)
	if err != nil || b.Run != runID {
		return Arrival{}, false
	}
	return Arrival{Send: b.Send, Key: keyOf[b.Send], MessageID: messageID, Reason: reason, ReplayCount: replayCount}, true
}

func stringAttr(r events.SQSMessage, name string) string {
	if a, ok := r.MessageAttributes[name]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}
