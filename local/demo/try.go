package demo

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/samstack"
	"github.com/sqs-once/sqs-once/internal/local/motoserver"
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
}

// parseTry reads `try [-stack NAME] [-template PATH] Name=Value...`. Errors
// name the template parameter (or flag) at fault.
func parseTry(args []string, stderr io.Writer) (tryParams, error) {
	fs := flag.NewFlagSet("sqs-once-local try", flag.ContinueOnError)
	fs.SetOutput(stderr)
	p := tryParams{params: map[string]string{}}
	fs.StringVar(&p.stack, "stack", "orders-once", "the local stack's NAME")
	fs.StringVar(&p.template, "template", "template.yaml", "SAM template to deploy")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sqs-once-local try [-stack NAME] [-template PATH] Target=lambda:FUNCTION ExistingQueueArn=arn:aws:sqs:us-east-1:123456789012:QUEUE [Name=Value...]

Starts moto_server, creates the queue ExistingQueueArn names and a stand-in
consumer function FUNCTION that consumes it, deploys the template in front of
them with ProcessorMappingEnabled=false and the given parameters, prints how
to point sqs-once at it, and keeps moto_server running until Ctrl-C.

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
	printTry(stdout, p, srv.Env())
	<-ctx.Done()
	fmt.Fprintln(stderr, "stopping moto_server...")
	return nil
}

// printTry prints the environment and the commands that point sqs-once at
// the local stack, ending with the TryReady line.
func printTry(w io.Writer, p tryParams, env map[string]string) {
	fmt.Fprintf(w, "Stack %s is deployed on a local moto_server in front of queue %s and its consumer %s.\n", p.stack, p.queueName, p.consumer)
	fmt.Fprintln(w, "In another shell, point sqs-once at it:")
	for _, k := range []string{"AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_EC2_METADATA_DISABLED"} {
		fmt.Fprintf(w, "  export %s=%s\n", k, env[k])
	}
	fmt.Fprintln(w, "then try:")
	for _, c := range []string{
		"sqs-once preflight --stack " + p.stack,
		"sqs-once cutover --stack " + p.stack + " --yes",
		"sqs-once status --stack " + p.stack,
		"sqs-once inspect --stack " + p.stack + " order-42",
		"sqs-once cutover --stack " + p.stack + " --rollback --yes",
	} {
		fmt.Fprintln(w, "  "+c)
	}
	fmt.Fprintf(w, "%s %s (Ctrl-C stops moto_server)\n", TryReady, env["AWS_ENDPOINT_URL"])
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
