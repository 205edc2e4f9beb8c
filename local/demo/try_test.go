package demo

import (
	"bytes"
	"net/url"
	"strings"
	"testing"
)

// TestTryParametersNameTheOneAtFault: each bad or missing parameter of
// `sqs-once-local try` is refused before anything starts, by name.
func TestTryParametersNameTheOneAtFault(t *testing.T) {
	const queue = "ExistingQueueArn=arn:aws:sqs:us-east-1:123456789012:orders"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{queue}, "parameter Target: give Target=lambda:FUNCTION"},
		{[]string{"Target=sqs:orders-out", queue}, "parameter Target: give Target=lambda:FUNCTION"},
		{[]string{"Target=lambda:orders-consumer"}, "parameter ExistingQueueArn: give the queue's ARN"},
		{[]string{"Target=lambda:orders-consumer", "ExistingQueueArn=orders"}, "parameter ExistingQueueArn: give the queue's ARN"},
		{[]string{"Target=lambda:orders-consumer", "ExistingQueueArn=arn:aws:sqs:eu-west-1:111122223333:orders"},
			"parameter ExistingQueueArn: the local emulator is region us-east-1, account 123456789012: give arn:aws:sqs:us-east-1:123456789012:orders"},
		{[]string{"Target=lambda:orders-consumer", queue, "ProcessorMappingEnabled=true"}, "parameter ProcessorMappingEnabled"},
		{[]string{"Target=lambda:orders-consumer", queue, "LockTimeout"}, `"LockTimeout" is not a template parameter: write Name=Value`},
		{[]string{"Target=lambda:a", "Target=lambda:b", queue}, "parameter Target is given twice"},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(t.Context(), append([]string{"try"}, tc.args...), &stdout, &stderr)
		if code != ExitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("try %v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), ExitUsage, tc.want)
		}
		if strings.Contains(stderr.String(), "starting moto_server") {
			t.Errorf("try %v started moto_server before refusing", tc.args)
		}
	}
	p, err := parseTry([]string{"Target=lambda:orders-consumer", queue}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if p.params["ProcessorMappingEnabled"] != "false" || p.consumer != "orders-consumer" || p.queueName != "orders" || p.stack != "orders-once" {
		t.Errorf("parsed %+v: want the consumer orders-consumer, queue orders, stack orders-once, ProcessorMappingEnabled=false", p)
	}
}

// TestTryDefaultsTheKeyToTheOrder: without IdempotencyKey= the try-out keys
// on the order, so that the printed second copy is a duplicate; one given
// is kept.
func TestTryDefaultsTheKeyToTheOrder(t *testing.T) {
	const queue = "ExistingQueueArn=arn:aws:sqs:us-east-1:123456789012:orders"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"Target=lambda:orders-consumer", queue}, "body:/orderId"},
		{[]string{"Target=lambda:orders-consumer", queue, "IdempotencyKey=messageId"}, "messageId"},
	} {
		p, err := parseTry(tc.args, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.params["IdempotencyKey"]; got != tc.want {
			t.Errorf("try %v: IdempotencyKey %q, want %q", tc.args, got, tc.want)
		}
	}
}

// TestTryRefusesAMissingCLI: a -cli that names no file is refused by name,
// before anything starts.
func TestTryRefusesAMissingCLI(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Main(t.Context(), []string{"try", "-cli", t.TempDir() + "/no-such-sqs-once", "Target=lambda:orders-consumer", "ExistingQueueArn=arn:aws:sqs:us-east-1:123456789012:orders"}, &stdout, &stderr)
	if code != ExitUsage || !strings.Contains(stderr.String(), "-cli ") || !strings.Contains(stderr.String(), "make cli") {
		t.Errorf("exit %d, stderr %q: want %d, naming -cli and make cli", code, stderr.String(), ExitUsage)
	}
	if strings.Contains(stderr.String(), "starting moto_server") {
		t.Error("started moto_server before refusing")
	}
}

// TestTryInstructionsRunAsPrinted: the printed commands name the CLI the
// user has (on a printed PATH, or by its path), and the send line carries
// the endpoint and region the AWS CLI v1 does not read from the
// environment.
func TestTryInstructionsRunAsPrinted(t *testing.T) {
	p, err := parseTry([]string{"Target=lambda:orders-consumer", "ExistingQueueArn=arn:aws:sqs:us-east-1:123456789012:orders"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:5000", "AWS_REGION": "us-east-1"}
	const queueURL = "http://127.0.0.1:5000/123456789012/orders"
	send := `  aws sqs send-message --endpoint-url http://127.0.0.1:5000 --region us-east-1 --queue-url ` + queueURL + ` --message-body '{"orderId":"order-42"}'` + "\n"
	for _, tc := range []struct {
		cli       string
		want, not []string
	}{
		{"/home/me/sqs-once/bin/sqs-once", []string{"  export PATH=/home/me/sqs-once/bin:$PATH\n", "\n  sqs-once preflight --stack orders-once\n", "\n  sqs-once inspect --stack orders-once order-42\n"}, []string{"make cli"}},
		{"/home/my dir/bin/sqs-once", []string{"  export PATH='/home/my dir/bin':$PATH\n", "\n  sqs-once cutover --stack orders-once --yes\n"}, nil},
		{"/opt/tools/sqs-once-1.0", []string{"\n  /opt/tools/sqs-once-1.0 preflight --stack orders-once\n"}, []string{"export PATH"}},
		{"", []string{"  make cli ", "\n  sqs-once preflight --stack orders-once\n"}, []string{"export PATH"}},
	} {
		got := tryInstructions(p, tc.cli, env, queueURL)
		for _, w := range append(tc.want, send+send, "\n"+TryReady+" http://127.0.0.1:5000 ") {
			if !strings.Contains(got, w) {
				t.Errorf("cli %q: the instructions lack %q:\n%s", tc.cli, w, got)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(got, n) {
				t.Errorf("cli %q: the instructions have %q:\n%s", tc.cli, n, got)
			}
		}
	}
}

// TestTryInvokeRouterRunsOnlyTheStandIn: the processor's Invoke of the
// stand-in, by name or ARN, runs it here with Lambda's answer; any other
// request goes to moto_server.
func TestTryInvokeRouterRunsOnlyTheStandIn(t *testing.T) {
	r := invokeRouter{function: "orders-consumer"}
	for path, want := range map[string]bool{
		"/2015-03-31/functions/orders-consumer/invocations":                                                                   true,
		"/2015-03-31/functions/arn%3Aaws%3Alambda%3Aus-east-1%3A123456789012%3Afunction%3Aorders-consumer/invocations":        true,
		"/2015-03-31/functions/arn%3Aaws%3Alambda%3Aus-east-1%3A123456789012%3Afunction%3Aorders-consumer%3Alive/invocations": true,
		"/2015-03-31/functions/orders-consumer-2/invocations":                                                                 false,
		"/2015-03-31/functions/orders-consumer":                                                                               false,
		"/2015-03-31/event-source-mappings/":                                                                                  false,
	} {
		u, err := url.Parse("http://127.0.0.1:5000" + path)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.invokesStandIn(u); got != want {
			t.Errorf("%s: routed to the stand-in %v, want %v", path, got, want)
		}
	}
}

// TestTryNamesAMisspeltRequiredParameter: a misspelt Target or
// ExistingQueueArn is refused by the name given, with the one meant, not
// as missing; a parameter really missing keeps its message.
func TestTryNamesAMisspeltRequiredParameter(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"Taget=lambda:orders-consumer", "ExistingQueueArn=arn:aws:sqs:us-east-1:123456789012:orders"}, "parameter Taget: the template has no such parameter; did you mean Target?"},
		{[]string{"Target=lambda:orders-consumer", "ExistingQueueARN=arn:aws:sqs:us-east-1:123456789012:orders"}, "parameter ExistingQueueARN: the template has no such parameter; did you mean ExistingQueueArn?"},
	} {
		_, err := parseTry(tc.args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("try %v: %v; want %q", tc.args, err, tc.want)
		}
	}
	_, err := parseTry([]string{"Target=lambda:orders-consumer"}, &bytes.Buffer{})
	if err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("ExistingQueueArn missing: %v; want it refused as missing, with no suggestion", err)
	}
}
