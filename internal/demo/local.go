package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/localesm"
	"github.com/sqs-once/sqs-once/internal/motoserver"
	"github.com/sqs-once/sqs-once/internal/processor"
	"github.com/sqs-once/sqs-once/internal/replay"
	"github.com/sqs-once/sqs-once/internal/samstack"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
)

// Logical ids of the template's resources the runner wires together.
const (
	processorFunction = "ProcessorFunction"
	replayerFunction  = "DlqReplayerFunction"
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

func newRunID() string {
	return strconv.FormatInt(time.Now().UnixNano()/1e6%(36*36*36*36*36*36), 36)
}

// localAWSConfig is an SDK configuration that can only reach the local
// server: static dummy credentials, the local endpoint, no instance metadata.
func localAWSConfig(ctx context.Context, endpoint string) (aws.Config, error) {
	return config.LoadDefaultConfig(ctx,
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
		"IdempotencyKey":   "body:/orderId",
		"ProcessorTimeout": strconv.Itoa(int(demoFunctionTimeout / time.Second)),
		"LockTimeout":      strconv.Itoa(int(demoLockTimeout / time.Second)),
		"BackoffBase":      strconv.Itoa(demoBackoffBase),
		"BackoffRate":      strconv.Itoa(demoBackoffRate),
		"MaxDelay":         strconv.Itoa(demoMaxDelay),
		"Jitter":           "full",
	}
	if opts.MaxReceiveCount > 0 {
		p["MaxReceiveCount"] = strconv.Itoa(opts.MaxReceiveCount)
	}
	if opts.MaxAttempts >= 0 {
		p["MaxAttempts"] = strconv.Itoa(opts.MaxAttempts)
	}
	return p
}

// pipeline is a deployed stack with its handlers behind local event source
// mappings.
type pipeline struct {
	sqs                    *sqs.Client
	mainURL, dlqURL, opURL string
	processor, replayer    samstack.Function
	maxReceiveCount        int
	replayCfg              replay.Config
	processorCfg           processor.Config
	adaptations            []string
	visibility             int
}

func runLocal(ctx context.Context, opts Options, progressOut io.Writer) (Summary, error) {
	start := time.Now()
	dir, err := runDir(opts)
	if err != nil {
		return Summary{}, err
	}
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
	// The handlers log through slog's default logger, as they do in Lambda.
	prevLogger := slog.Default()
	slog.SetDefault(newFunctionLogger(logOut))
	defer slog.SetDefault(prevLogger)

	endpoint := opts.Endpoint
	if endpoint == "" {
		fmt.Fprintln(progressOut, "starting moto_server...")
		srv, err := motoserver.Start(ctx)
		if err != nil {
			return Summary{}, err
		}
		defer srv.Stop()
		// Anything that reads the environment (the SDK's defaults, a
		// subprocess) now reaches only this server, with dummy credentials.
		if err := srv.SetProcessEnv(); err != nil {
			return Summary{}, err
		}
		endpoint = srv.URL
	}
	awsCfg, err := localAWSConfig(ctx, endpoint)
	if err != nil {
		return Summary{}, err
	}

	runID := newRunID()
	stackName := "sqs-once-demo-" + runID
	fmt.Fprintf(progressOut, "creating stack %s from %s on %s...\n", stackName, opts.Template, endpoint)
	p, err := deployPipeline(ctx, awsCfg, opts, stackName)
	if err != nil {
		return Summary{}, err
	}
	return runPipeline(ctx, opts, awsCfg, p, runID, dir, logPath, start, progressOut)
}

// runPipeline runs the workload through a deployed pipeline and evaluates it.
func runPipeline(ctx context.Context, opts Options, awsCfg aws.Config, p *pipeline, runID, dir, logPath string,
	start time.Time, progressOut io.Writer) (Summary, error) {
	w, err := NewWorkload(opts.spec(p.maxReceiveCount), opts.Seed, runID)
	if err != nil {
		return Summary{}, err
	}
	ledger, err := OpenLedger(filepath.Join(dir, "ledger.jsonl"))
	if err != nil {
		return Summary{}, err
	}
	defer ledger.Close()
	biz := NewBusiness(ledger, w)
	defer biz.Release()
	tracker := NewTracker()

	// The processor exactly as cmd/processor builds it, except that moto's
	// conditional writes are made atomic, as DynamoDB's are: moto checks a
	// condition and writes without a lock between the two, and this demo races
	// duplicates against each other on purpose.
	procHandler := processor.New(p.processorCfg, processor.Deps{
		DynamoDB: motoserver.SerializeWrites(dynamodb.NewFromConfig(awsCfg)),
		SQS:      sqs.NewFromConfig(awsCfg),
		Business: biz.Handle,
	})
	replayHandler := replay.NewHandler(p.replayCfg, observeReplays(awsCfg, p.replayCfg.MainQueueURL, tracker.Replayed))
	fnLog := slog.Default()
	mappings := []struct {
		cfg localesm.Config
		h   localesm.Handler
	}{
		{localesm.Config{
			QueueURL: p.mainURL, FunctionName: p.processor.Name, Pollers: opts.Concurrency, Timeout: p.processor.Timeout,
			OnInvoke: tracker.MainInvocation, Logger: fnLog,
		}, procHandler.Handle},
		{localesm.Config{
			QueueURL: p.dlqURL, FunctionName: p.replayer.Name, Pollers: 2, Timeout: p.replayer.Timeout,
			OnInvoke: tracker.DeadLetterInvocation, Logger: fnLog,
		}, replayHandler.Handle},
		{localesm.Config{
			QueueURL: p.opURL, FunctionName: "operator", Pollers: 1, Timeout: 30 * time.Second, Logger: fnLog,
		}, operatorHandler(tracker, w, nil)},
	}
	applyEventSource(&mappings[0].cfg, p.processor)
	applyEventSource(&mappings[1].cfg, p.replayer)

	pollCtx, stopPolling := context.WithCancel(ctx)
	defer stopPolling()
	var running sync.WaitGroup
	runErrs := make(chan error, len(mappings))
	for _, m := range mappings {
		esm, err := localesm.New(p.sqs, m.cfg, m.h)
		if err != nil {
			return Summary{}, err
		}
		running.Go(func() {
			if err := esm.Run(pollCtx); err != nil {
				// A mapping that cannot start stops the run at once rather
				// than after -wait.
				runErrs <- err
				stopPolling()
			}
		})
	}
	stopAll := func() {
		biz.Release()
		stopPolling()
		running.Wait()
	}

	fmt.Fprintf(progressOut, "sending %d messages for %d keys...\n", len(w.Sends), len(w.Keys))
	prog := newProgressWriter(progressOut)
	waitErr := drive(pollCtx, p.sqs, p.mainURL, w, tracker, ledger, prog, start, opts.wait(), []string{p.mainURL, p.dlqURL, p.opURL})
	prog.Done()
	stopAll()
	close(runErrs)
	var mappingErr error
	for err := range runErrs {
		mappingErr = errors.Join(mappingErr, err)
	}
	if mappingErr != nil {
		return Summary{}, mappingErr
	}
	if waitErr != nil && ctx.Err() != nil {
		return Summary{}, waitErr
	}

	left, err := leftInQueues(context.WithoutCancel(ctx), p.sqs, p.mainURL, p.dlqURL)
	if err != nil {
		return Summary{}, err
	}
	if err := ledger.Close(); err != nil {
		return Summary{}, err
	}
	entries, err := ReadLedger(ledger.Path())
	if err != nil {
		return Summary{}, err
	}
	obs := tracker.Snapshot()
	obs.Left = left
	obs.Elapsed = time.Since(start)
	sum := Summarize(w, entries, obs, Evaluation{
		Mode:    "local",
		Seed:    opts.Seed,
		Timings: p.timings(),
		Ceiling: func(n int) float64 { return p.replayCfg.Backoff.Ceiling(n).Seconds() },
		Ledger:  ledger.Path(),
		Logs:    logPath,
	})
	if waitErr != nil {
		sum.Violations = append(sum.Violations, waitErr.Error())
		sum.OK = false
	}
	sum.Adaptations = p.adaptations
	return sum, nil
}

// applyEventSource sizes a mapping like the function's deployed event source
// mapping: batch size, batching window, and no more pollers than its maximum
// concurrency.
func applyEventSource(cfg *localesm.Config, fn samstack.Function) {
	if len(fn.EventSources) == 0 {
		return
	}
	es := fn.EventSources[0]
	if es.BatchSize > 0 {
		cfg.BatchSize = es.BatchSize
	}
	cfg.BatchingWindow = es.BatchingWindow
	if es.MaximumConcurrency > 0 && cfg.Pollers > es.MaximumConcurrency {
		cfg.Pollers = es.MaximumConcurrency
	}
}

func (p *pipeline) timings() Timings {
	b := p.replayCfg.Backoff
	return Timings{
		VisibilityTimeoutSeconds: p.visibility,
		FunctionTimeoutSeconds:   int(p.processor.Timeout / time.Second),
		LockTimeoutSeconds:       int(p.processorCfg.LockTimeout / time.Second),
		MaxReceiveCount:          p.maxReceiveCount,
		MaxAttempts:              p.replayCfg.MaxAttempts,
		BackoffBaseSeconds:       b.Base.Seconds(),
		BackoffRate:              b.Rate,
		MaxDelaySeconds:          int(b.Cap / time.Second),
		Jitter:                   string(b.Strategy),
	}
}

// deployPipeline creates the stack from the template, shortens the queues'
// visibility timeouts for the demo, and loads both functions' configurations
// from the environment the template gave them.
func deployPipeline(ctx context.Context, awsCfg aws.Config, opts Options, stackName string) (*pipeline, error) {
	st, err := samstack.Deploy(ctx, awsCfg, stackName, opts.Template, demoParameters(opts))
	if err != nil {
		return nil, fmt.Errorf("create the stack from %s: %w", opts.Template, err)
	}
	p := &pipeline{sqs: sqs.NewFromConfig(awsCfg), visibility: int(opts.Visibility / time.Second)}
	for _, a := range st.Adaptations {
		p.adaptations = append(p.adaptations, a.String())
	}
	if err := p.wire(ctx, st); err != nil {
		return nil, err
	}
	// The template ties the main queue's visibility timeout to six times the
	// processor's timeout (AWS's advice), at least 6 s; failed messages would
	// then take minutes to reach the DLQ. The demo shortens it, and the
	// DLQ's, after the deploy.
	for _, url := range []string{p.mainURL, p.dlqURL} {
		_, err := p.sqs.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{
			QueueUrl:   aws.String(url),
			Attributes: map[string]string{string(sqstypes.QueueAttributeNameVisibilityTimeout): strconv.Itoa(p.visibility)},
		})
		if err != nil {
			return nil, fmt.Errorf("set the demo visibility timeout on %s: %w", url, err)
		}
	}
	return p, nil
}

// wire finds the queues and functions of a described stack and loads the
// functions' configurations from their environments.
func (p *pipeline) wire(ctx context.Context, st *samstack.Stack) error {
	var err error
	for key, dst := range map[string]*string{"MainQueueUrl": &p.mainURL, "DeadLetterQueueUrl": &p.dlqURL, "OperatorQueueUrl": &p.opURL} {
		if *dst, err = st.Output(key); err != nil {
			return err
		}
	}
	var ok bool
	if p.processor, ok = st.Functions[processorFunction]; !ok {
		return fmt.Errorf("stack %s has no %s", st.Name, processorFunction)
	}
	if p.replayer, ok = st.Functions[replayerFunction]; !ok {
		return fmt.Errorf("stack %s has no %s", st.Name, replayerFunction)
	}
	if p.processorCfg, err = processor.LoadConfig(envconfig.Map(p.processor.Env)); err != nil {
		return fmt.Errorf("%s's environment: %w", processorFunction, err)
	}
	if p.replayCfg, err = replay.LoadConfig(envconfig.Map(p.replayer.Env)); err != nil {
		return fmt.Errorf("%s's environment: %w", replayerFunction, err)
	}
	p.maxReceiveCount, err = maxReceiveCount(ctx, p.sqs, p.mainURL)
	return err
}

// maxReceiveCount reads the main queue's redrive policy: the value the queue
// really has, whatever the template or the flags said.
func maxReceiveCount(ctx context.Context, api *sqs.Client, url string) (int, error) {
	out, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameRedrivePolicy},
	})
	if err != nil {
		return 0, fmt.Errorf("read the redrive policy of %s: %w", url, err)
	}
	return parseMaxReceiveCount(out.Attributes[string(sqstypes.QueueAttributeNameRedrivePolicy)])
}

// leftInQueues is what the main queue and the DLQ still hold, by role.
func leftInQueues(ctx context.Context, api *sqs.Client, mainURL, dlqURL string) (map[string]int, error) {
	left := map[string]int{}
	for role, url := range map[string]string{"main": mainURL, "dead-letter": dlqURL} {
		n, err := queueDepth(ctx, api, url)
		if err != nil {
			return nil, err
		}
		left[role] = n
	}
	return left, nil
}

// queueDepth is every message a queue still holds: visible, in flight or
// delayed.
func queueDepth(ctx context.Context, api *sqs.Client, url string) (int, error) {
	out, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		return 0, fmt.Errorf("read the depth of %s: %w", url, err)
	}
	total := 0
	for _, v := range out.Attributes {
		n, _ := strconv.Atoi(v)
		total += n
	}
	return total, nil
}

// operatorHandler plays the operator: it records every message of this run
// that reaches the operator queue, with its reason, and deletes it. Messages
// of other producers are left alone; hide, when set, makes them visible again
// at once for whoever else reads the queue.
func operatorHandler(t *Tracker, w Workload, hide func(ctx context.Context, receiptHandle string)) localesm.Handler {
	sendKey := map[string]string{}
	for _, s := range w.Sends {
		sendKey[s.ID] = s.Key
	}
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		var resp events.SQSEventResponse
		for _, r := range ev.Records {
			b, err := ParseBody(r.Body)
			if err != nil || b.Run != w.RunID {
				t.Foreign()
				if hide != nil {
					hide(ctx, r.ReceiptHandle)
				}
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
				continue
			}
			t.AtOperator(Arrival{
				Send:        b.Send,
				Key:         sendKey[b.Send],
				Reason:      stringAttr(r, sqsmsg.AttrReason),
				ReplayCount: stringAttr(r, sqsmsg.AttrReplayCount),
			})
		}
		return resp, nil
	}
}

func stringAttr(r events.SQSMessage, name string) string {
	if a, ok := r.MessageAttributes[name]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}
