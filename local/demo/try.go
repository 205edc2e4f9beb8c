package demo

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/samstack"
	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/internal/suggest"
)

// TryReady starts the line Try prints once the stack is deployed and the
// CLI can be pointed at it; a script (or test) waits for it.
const TryReady = "ready:"

// tryAccount is moto_server's account: an ExistingQueueArn must name a queue
// in it (and in motoserver.Region) for the CLI to find it there.
const tryAccount = "123456789012"

// tryQueueAttributes are the stand-in queue's settings: a visibility
// timeout that fits the stack's default ProcessorTimeout (30 s, six times),
// and the retention tryMaxMessageAge matches, so that preflight passes on
// the defaults and each parameter changed shows what it checks. The
// stand-in consumer's timeout (10 s) is well within ProcessorTimeout.
var tryQueueAttributes = map[string]string{
	string(sqstypes.QueueAttributeNameVisibilityTimeout):      "180",
	string(sqstypes.QueueAttributeNameMessageRetentionPeriod): tryMaxMessageAge,
}

const tryMaxMessageAge = "345600"

// tryParams is what `sqs-once-local try` was given.
type tryParams struct {
	stack, template string
	params          map[string]string
	queueName       string
	consumer        string
	// cli is the operator CLI the printed commands run: -cli, or the
	// sqs-once beside this program (where make cli writes it).
	cli string
}

// tryIdempotencyKey is the key the try-out deploys without an
// IdempotencyKey= of the user's: the order, so that a second copy of an
// order sent again (a new SQS message, a new messageId) is a duplicate, as
// a producer's re-send is. The template's default, messageId, would make
// it a new order.
const tryIdempotencyKey = "body:/orderId"

// parseTry reads `try [-stack NAME] [-template PATH] Name=Value...`. Errors
// name the template parameter (or flag) at fault.
func parseTry(args []string, stderr io.Writer) (tryParams, error) {
	fs := flag.NewFlagSet("sqs-once-local try", flag.ContinueOnError)
	fs.SetOutput(stderr)
	p := tryParams{params: map[string]string{}}
	fs.StringVar(&p.stack, "stack", "orders-once", "the local stack's NAME")
	fs.StringVar(&p.template, "template", "template.yaml", "SAM template to deploy")
	fs.StringVar(&p.cli, "cli", "", "the sqs-once CLI the printed commands run (default: sqs-once beside this program, where make cli writes it)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sqs-once-local try [-stack NAME] [-template PATH] [-cli PATH] Target=lambda:FUNCTION ExistingQueueArn=arn:aws:sqs:us-east-1:123456789012:QUEUE [Name=Value...]

Starts moto_server, creates the queue ExistingQueueArn names and a stand-in
consumer function FUNCTION that consumes it, deploys the template in front of
them with ProcessorMappingEnabled=false, IdempotencyKey=body:/orderId and the
given parameters, prints how to point sqs-once at it and how to send an
order, and runs the consumer and the stack's processor for real until
Ctrl-C: each reads the queue while its event source mapping is Enabled, so
sqs-once cutover hands the queue to the processor (which invokes the
consumer once per order) and a rollback gives it back. The consumer prints
a line for each run.

`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return p, ErrHelp
		}
		return p, err
	}
	for _, kv := range fs.Args() {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return p, fmt.Errorf("%q is not a template parameter: write Name=Value, e.g. Target=lambda:orders-consumer", kv)
		}
		if _, dup := p.params[name]; dup {
			return p, fmt.Errorf("parameter %s is given twice", name)
		}
		p.params[name] = value
	}
	// A misspelt Target or ExistingQueueArn would be refused below as
	// missing: name it, with the one meant, as samstack refuses any other.
	for _, required := range []string{"Target", "ExistingQueueArn"} {
		if _, given := p.params[required]; given {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(p.params)) {
			if _, near := suggest.Closest(name, []string{required}); near {
				return p, samstack.NoSuchParameter(name, []string{required})
			}
		}
	}
	fn, ok := strings.CutPrefix(p.params["Target"], "lambda:")
	if !ok || fn == "" || strings.Contains(fn, ":") {
		return p, fmt.Errorf("parameter Target: give Target=lambda:FUNCTION (got %q): the stand-in consumer is a Lambda function, the one the stack will deliver to", p.params["Target"])
	}
	p.consumer = fn
	arn := p.params["ExistingQueueArn"]
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" || parts[5] == "" {
		return p, fmt.Errorf("parameter ExistingQueueArn: give the queue's ARN, arn:aws:sqs:%s:%s:QUEUE (got %q)", motoserver.Region, tryAccount, arn)
	}
	if parts[3] != motoserver.Region || parts[4] != tryAccount {
		return p, fmt.Errorf("parameter ExistingQueueArn: the local emulator is region %s, account %s: give arn:aws:sqs:%s:%s:%s (got %q)",
			motoserver.Region, tryAccount, motoserver.Region, tryAccount, parts[5], arn)
	}
	p.queueName = parts[5]
	if v, ok := p.params["ProcessorMappingEnabled"]; ok && v != "false" {
		return p, fmt.Errorf("parameter ProcessorMappingEnabled: the local stack is deployed with false (the consumer keeps the queue until sqs-once cutover), got %q", v)
	}
	p.params["ProcessorMappingEnabled"] = "false"
	if _, ok := p.params["MaxMessageAge"]; !ok {
		p.params["MaxMessageAge"] = tryMaxMessageAge
	}
	if _, ok := p.params["IdempotencyKey"]; !ok {
		p.params["IdempotencyKey"] = tryIdempotencyKey
	}
	return p, nil
}

// Try runs `sqs-once-local try`: a stack in front of a stand-in consumer on
// a local moto_server, kept until ctx ends. It returns the exit status.
func Try(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	p, err := parseTry(args, stderr)
	if errors.Is(err, ErrHelp) {
		return ExitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "sqs-once-local try:", err)
		return ExitUsage
	}
	if err := tryRun(ctx, p, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "sqs-once-local try:", err)
		return ExitUsage
	}
	return ExitOK
}

func tryRun(ctx context.Context, p tryParams, stdout, stderr io.Writer) error {
	cli, err := tryCLI(p.cli)
	if err != nil {
		return err
	}
	// The translation checks the parameters (each error names one) before
	// anything starts.
	prep, err := samstack.Prepare(ctx, motoserver.Region, p.stack, p.template, p.params)
	if err != nil {
		return err
	}
	fmt.Fprintln(stderr, "starting moto_server...")
	srv, err := motoserver.Start(ctx)
	if err != nil {
		return err
	}
	defer srv.Stop()
	if err := srv.SetProcessEnv(); err != nil {
		return err
	}
	awsCfg, err := localAWSConfig(ctx, srv.URL)
	if err != nil {
		return err
	}
	// The functions' own log lines, and the SDK's, go to a file: the
	// terminal shows what each function did, one line each.
	logDir, err := os.MkdirTemp("", "sqs-once-try-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(logDir)
	logFile, err := os.Create(filepath.Join(logDir, "functions.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	fnLog := newFunctionLogger(logFile)
	awsCfg.Logger = sdkLogger(fnLog)
	api := sqs.NewFromConfig(awsCfg)
	q, err := api.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(p.queueName), Attributes: tryQueueAttributes})
	if err != nil {
		return fmt.Errorf("create the queue %s: %w", p.queueName, err)
	}
	queueARN := p.params["ExistingQueueArn"]
	if err := createStandIn(ctx, awsCfg, p.consumer, queueARN); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "created queue %s and consumer %s (its mapping on the queue enabled); deploying stack %s...\n", p.queueName, p.consumer, p.stack)
	st, err := prep.Deploy(ctx, awsCfg)
	if err != nil {
		return fmt.Errorf("deploy %s: %w", p.template, err)
	}
	// The migration guide's step before the cutover: the queue's redrive
	// policy sends to the stack's dead-letter queue.
	dlq, err := st.Output("DeadLetterQueueArn")
	if err != nil {
		return err
	}
	if _, err := api.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{
		QueueUrl:   q.QueueUrl,
		Attributes: map[string]string{string(sqstypes.QueueAttributeNameRedrivePolicy): `{"deadLetterTargetArn":"` + dlq + `","maxReceiveCount":"5"}`},
	}); err != nil {
		return fmt.Errorf("set the redrive policy of %s: %w", p.queueName, err)
	}
	info, err := loadStack(ctx, api, st)
	if err != nil {
		return err
	}
	out := &lineWriter{w: stdout}
	pipe, err := newTryPipeline(ctx, awsCfg, p, aws.ToString(q.QueueUrl), queueARN, info, out, fnLog)
	if err != nil {
		return err
	}
	out.printf("%s", tryInstructions(p, cli, srv.Env(), aws.ToString(q.QueueUrl)))
	// The functions run until Ctrl-C; moto_server stops only once they
	// have, so no poll is cut off by it.
	pipe.run(ctx)
	fmt.Fprintln(stderr, "stopping moto_server...")
	return nil
}

// tryCLI is the sqs-once CLI the printed commands run: -cli (which must
// exist), or the sqs-once beside this program, where make cli writes it
// ("" when there is none: the commands then name sqs-once on PATH).
func tryCLI(flagged string) (string, error) {
	if flagged != "" {
		abs, err := filepath.Abs(flagged)
		if err == nil {
			_, err = os.Stat(abs)
		}
		if err != nil {
			return "", fmt.Errorf("-cli %s: %w (make cli builds bin/sqs-once)", flagged, err)
		}
		return abs, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", nil
	}
	beside := filepath.Join(filepath.Dir(exe), "sqs-once")
	if _, err := os.Stat(beside); err != nil {
		return "", nil
	}
	return beside, nil
}

// tryOrder is the order the printed send-message commands send.
const tryOrder = "order-42"

// tryInstructions is what Try prints once everything runs: the environment
// and the commands that point sqs-once at the local stack, the two sends of
// one order, ending with the TryReady line.
func tryInstructions(p tryParams, cli string, env map[string]string, queueURL string) string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("Stack %s is deployed on a local moto_server in front of queue %s and its consumer %s.", p.stack, p.queueName, p.consumer)
	line("%s and the stack's processor run here for real; this shell prints each run of %s.", p.consumer, p.consumer)
	line("In another shell, point sqs-once at it:")
	// The commands name sqs-once: the CLI make cli built is put first on
	// PATH, so they run as printed from any directory.
	name := "sqs-once"
	switch {
	case cli == "":
		line("  make cli    # builds bin/sqs-once: put its directory on PATH")
	case filepath.Base(cli) == "sqs-once":
		line("  export PATH=%s:$PATH", shellQuote(filepath.Dir(cli)))
	default:
		name = shellQuote(cli)
	}
	for _, k := range []string{"AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_EC2_METADATA_DISABLED"} {
		line("  export %s=%s", k, env[k])
	}
	line("then check the stack and cut the queue over to it:")
	line("  %s preflight --stack %s", name, p.stack)
	line("  %s cutover --stack %s --yes", name, p.stack)
	line("send an order, then the same order again (the AWS CLI v1 ignores AWS_ENDPOINT_URL: hence --endpoint-url):")
	send := fmt.Sprintf("aws sqs send-message --endpoint-url %s --region %s --queue-url %s --message-body '{\"orderId\":\"%s\"}'",
		env["AWS_ENDPOINT_URL"], motoserver.Region, queueURL, tryOrder)
	line("  %s", send)
	line("  %s", send)
	key := tryOrder
	if k := p.params["IdempotencyKey"]; k != tryIdempotencyKey {
		line("  (with IdempotencyKey=%s the second copy is a duplicate only if it has the first's key)", k)
		key = "KEY"
	}
	line("this shell then shows one run of %s for the order, and the second copy deleted as a duplicate; see it with:", p.consumer)
	line("  %s status --stack %s", name, p.stack)
	line("  %s inspect --stack %s %s", name, p.stack, key)
	line("and give the queue back to %s:", p.consumer)
	line("  %s cutover --stack %s --rollback --yes", name, p.stack)
	fmt.Fprintf(&b, "%s %s (Ctrl-C stops moto_server)", TryReady, env["AWS_ENDPOINT_URL"])
	return b.String()
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+,:@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// createStandIn creates the consumer function name, with a role, and its
// enabled mapping on the queue, as a live consumer has.
func createStandIn(ctx context.Context, awsCfg aws.Config, name, queueARN string) error {
	role, err := iam.NewFromConfig(awsCfg).CreateRole(ctx, &iam.CreateRoleInput{
		RoleName:                 aws.String(name + "-role"),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"lambda.amazonaws.com"},"Action":"sts:AssumeRole"}]}`),
	})
	if err != nil {
		return fmt.Errorf("create the consumer's role: %w", err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	f, err := zw.Create("bootstrap")
	if err == nil {
		_, err = f.Write([]byte("#!/bin/sh\n"))
	}
	if err = errors.Join(err, zw.Close()); err != nil {
		return err
	}
	lc := lambda.NewFromConfig(awsCfg)
	if _, err := lc.CreateFunction(ctx, &lambda.CreateFunctionInput{
		FunctionName: aws.String(name), Role: role.Role.Arn, Runtime: lambdatypes.RuntimeProvidedal2023,
		Handler: aws.String("bootstrap"), Code: &lambdatypes.FunctionCode{ZipFile: buf.Bytes()},
		Architectures: []lambdatypes.Architecture{lambdatypes.ArchitectureArm64}, Timeout: aws.Int32(10),
	}); err != nil {
		return fmt.Errorf("create the consumer %s: %w", name, err)
	}
	if _, err := lc.CreateEventSourceMapping(ctx, &lambda.CreateEventSourceMappingInput{
		FunctionName: aws.String(name), EventSourceArn: aws.String(queueARN), Enabled: aws.Bool(true),
	}); err != nil {
		return fmt.Errorf("map queue %s to %s: %w", queueARN, name, err)
	}
	return nil
}

// isTry reports whether args ask for the try subcommand.
func isTry(args []string) bool { return len(args) > 0 && args[0] == "try" }
