//go:build integration

package ops_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/internal/ops"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
)

// toMoto sends every request, addressed to AWS's own host names, to
// moto_server instead, Host header kept: moto tells the service from it.
type toMoto struct{ moto *url.URL }

func (r toMoto) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Host = req.URL.Host
	req.URL.Scheme, req.URL.Host = r.moto.Scheme, r.moto.Host
	return http.DefaultTransport.RoundTrip(req)
}

// awsLike is the AWS configuration of a CLI run on AWS's own endpoints,
// no AWS_ENDPOINT_URL, whose requests reach moto_server all the same: what
// the CLI prints and judges is what it would on AWS.
func awsLike(t *testing.T) *aws.Config {
	t.Helper()
	moto, err := url.Parse(mototest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := mototest.Config(t)
	cfg.BaseEndpoint, cfg.ConfigSources = nil, nil
	cfg.HTTPClient = &http.Client{Transport: toMoto{moto}}
	return &cfg
}

// TestStatusAgeNotAvailableOnTheEmulator: moto_server does not serve
// CloudWatch's oldest-message age (a 404 the SDK cannot decode); with
// AWS_ENDPOINT_URL set, status says the metric is not available on this
// endpoint rather than print the SDK's error, which --verbose and --json
// keep. The same answer on AWS's own endpoint is a fault, and shown.
func TestStatusAgeNotAvailableOnTheEmulator(t *testing.T) {
	t.Parallel()
	st, _, _, _ := queueTest(t)

	// The CLI's own configuration chain, AWS_ENDPOINT_URL from the
	// environment, as make try's exports set it.
	r := run(t, runOpts{}, "status", "--stack", st.Name)
	text := words(r.stdout)
	if r.code != ops.ExitOK || !strings.Contains(text, "oldest: not available on this endpoint (the endpoint set in place of AWS's does not serve CloudWatch's ApproximateAgeOfOldestMessage; --verbose shows the SDK's error)") {
		t.Errorf("status on the emulator: exit %d, no 'not available on this endpoint' line", r.code)
	}
	for _, raw := range []string{"StatusCode", "404", "decode", "AWS call failed", "unknown"} {
		if strings.Contains(r.stdout, raw) {
			t.Errorf("status without --verbose shows the SDK's error (%q)", raw)
		}
	}
	if n := strings.Count(r.stdout, "oldest: "); n != 1 {
		t.Errorf("%d notes on the age; want one for the three queues", n)
	}

	r = run(t, runOpts{}, "status", "--stack", st.Name, "--verbose")
	if text := words(r.stdout); r.code != ops.ExitOK || !strings.Contains(text, "oldest: not available on this endpoint (the endpoint set in place of AWS's does not serve CloudWatch's ApproximateAgeOfOldestMessage): operation error CloudWatch: GetMetricStatistics, https response error StatusCode: 404") {
		t.Errorf("status --verbose does not give the SDK's error after the note")
	}

	r = run(t, runOpts{}, "status", "--stack", st.Name, "--json")
	var rep struct{ Queues []ops.QueueStatus }
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.Queues) != 3 {
		t.Fatalf("status --json: %v, %d queues", err, len(rep.Queues))
	}
	for _, q := range rep.Queues {
		if q.AgeNote != ops.AgeNotAvailable || !strings.Contains(q.AgeError, "StatusCode: 404") {
			t.Errorf("status --json, queue %s: ageNote %q, ageError %q", q.Name, q.AgeNote, q.AgeError)
		}
	}

	// On AWS's own endpoint the same 404 is no emulator's gap: a fault,
	// shown whole.
	r = run(t, runOpts{cfg: awsLike(t)}, "status", "--stack", st.Name)
	text = words(r.stdout)
	if r.code != ops.ExitOK || !strings.Contains(text, "oldest: unknown: CloudWatch: AWS call failed: operation error CloudWatch: GetMetricStatistics, https response error StatusCode: 404") {
		t.Errorf("status on AWS's endpoint: exit %d, the 404 not shown as the fault it is there", r.code)
	}
	if strings.Contains(text, "not available on this endpoint") {
		t.Errorf("status on AWS's endpoint says the metric is not available there")
	}
}

// awsCommand finds each AWS CLI command a line prints.
var awsCommand = regexp.MustCompile(`\baws (sqs|lambda|dynamodb|stepfunctions) [a-z-]+[^\n]*`)

// TestPrintedCommandsCarryTheEndpoint: with AWS_ENDPOINT_URL set (the
// try-out's emulator), every AWS CLI command preflight prints to fix a
// check carries --endpoint-url with that URL, which the AWS CLI v1 needs
// (it ignores the variable); on AWS's own endpoints none does. The checks
// fail on purpose for each service's fix: the queue's visibility timeout
// (sqs), another function's mapping on the queue (lambda), the table
// deleted (dynamodb).
func TestPrintedCommandsCarryTheEndpoint(t *testing.T) {
	t.Parallel()
	e := newMigrationEnv(t, map[string]string{"VisibilityTimeout": "60", "MessageRetentionPeriod": "345600"})
	cfg := mototest.Config(t)
	other := mototest.NewFunction(t, cfg)
	if _, err := e.lambda.CreateEventSourceMapping(context.Background(), &lambda.CreateEventSourceMappingInput{
		FunctionName: aws.String(other), EventSourceArn: aws.String(e.queueARN), Enabled: aws.Bool(true),
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := dynamodb.NewFromConfig(cfg).DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(e.output("IdempotencyTableName"))}); err != nil {
		t.Fatal(err)
	}
	moto := mototest.URL(t)

	r := run(t, runOpts{}, "preflight", "--stack", e.st.Name)
	if r.code != ops.ExitCheckFailed {
		t.Fatalf("preflight: exit %d, want %d", r.code, ops.ExitCheckFailed)
	}
	services := map[string]bool{}
	for _, m := range awsCommand.FindAllStringSubmatch(r.stdout, -1) {
		services[m[1]] = true
		if !strings.Contains(m[0]+" ", " --region us-east-1 --endpoint-url "+moto+" ") {
			t.Errorf("with AWS_ENDPOINT_URL=%s, preflight prints %q without --endpoint-url %s", moto, m[0], moto)
		}
	}
	if !services["sqs"] || !services["lambda"] || !services["dynamodb"] {
		t.Errorf("preflight printed commands for %v; want sqs, lambda and dynamodb", services)
	}
	if want := "change: aws sqs set-queue-attributes --region us-east-1 --endpoint-url " + moto + " --queue-url " + e.queueURL + " --attributes VisibilityTimeout=180\n"; !strings.Contains(r.stdout, want) {
		t.Errorf("preflight does not say %q", want)
	}

	// The same stack seen on AWS's own endpoints: no --endpoint-url, the
	// commands otherwise the same.
	r = run(t, runOpts{cfg: awsLike(t)}, "preflight", "--stack", e.st.Name)
	if r.code != ops.ExitCheckFailed {
		t.Fatalf("preflight on AWS's endpoints: exit %d, want %d", r.code, ops.ExitCheckFailed)
	}
	if n := len(awsCommand.FindAllString(r.stdout, -1)); n < 3 || strings.Contains(r.stdout, "--endpoint-url") {
		t.Errorf("on AWS's endpoints preflight prints %d commands, some with --endpoint-url", n)
	}
	if want := "change: aws sqs set-queue-attributes --region us-east-1 --queue-url " + e.queueURL + " --attributes VisibilityTimeout=180\n"; !strings.Contains(r.stdout, want) {
		t.Errorf("preflight on AWS's endpoints does not say %q", want)
	}
}
