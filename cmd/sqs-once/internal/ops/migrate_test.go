//go:build integration

package ops_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/internal/ops"
	"github.com/sqs-once/sqs-once/cmd/sqs-once/samstack"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
)

// migrationEnv is an existing queue, the Lambda consumer that reads it
// through its own event source mapping, and an sqs-once stack deployed in
// front of them as docs/migration.md says: ExistingQueueArn,
// Target=lambda:<consumer>, ProcessorMappingEnabled=false.
type migrationEnv struct {
	t        *testing.T
	lambda   *lambda.Client
	sqs      *sqs.Client
	queueURL string // as the stack names it (MainQueueUrl)
	queueARN string
	consumer string
	// consumerMapping is the consumer's own mapping on the queue.
	consumerMapping string
	st              *samstack.Stack
}

func newMigrationEnv(t *testing.T, queueAttrs map[string]string) *migrationEnv {
	t.Helper()
	cfg := mototest.Config(t)
	ctx := context.Background()
	e := &migrationEnv{t: t, lambda: lambda.NewFromConfig(cfg), sqs: sqs.NewFromConfig(cfg)}
	e.queueARN = mototest.QueueARN(t, cfg, mototest.NewQueue(t, cfg, false, queueAttrs))
	e.consumer = mototest.NewFunction(t, cfg)
	if _, err := e.lambda.UpdateFunctionConfiguration(ctx, &lambda.UpdateFunctionConfigurationInput{
		FunctionName: aws.String(e.consumer), Timeout: aws.Int32(10),
	}); err != nil {
		t.Fatal(err)
	}
	es, err := e.lambda.CreateEventSourceMapping(ctx, &lambda.CreateEventSourceMappingInput{
		FunctionName: aws.String(e.consumer), EventSourceArn: aws.String(e.queueARN), Enabled: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.consumerMapping = aws.ToString(es.UUID)
	dctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	e.st, err = samstack.Deploy(dctx, cfg, mototest.Name("migrate"), filepath.Join("..", "..", "..", "..", "template.yaml"), map[string]string{
		"ExistingQueueArn":        e.queueARN,
		"Target":                  "lambda:" + e.consumer,
		"ProcessorMappingEnabled": "false",
		"MaxMessageAge":           "345600",
	})
	if err != nil {
		t.Fatalf("deploy the stack in front of the consumer: %v", err)
	}
	e.queueURL = e.output("MainQueueUrl")
	return e
}

func (e *migrationEnv) output(key string) string {
	e.t.Helper()
	v, err := e.st.Output(key)
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

// stackMapping is the UUID of the stack's mapping on the queue.
func (e *migrationEnv) stackMapping() string {
	e.t.Helper()
	r, ok := e.st.Resources["ProcessorFunctionMainQueue"]
	if !ok {
		e.t.Fatalf("the stack has no ProcessorFunctionMainQueue mapping; resources: %v", e.st.Resources)
	}
	return r.PhysicalID
}

func (e *migrationEnv) state(uuid string) string {
	e.t.Helper()
	out, err := e.lambda.GetEventSourceMapping(context.Background(), &lambda.GetEventSourceMappingInput{UUID: aws.String(uuid)})
	if err != nil {
		e.t.Fatal(err)
	}
	return aws.ToString(out.State)
}

func (e *migrationEnv) setMapping(uuid string, enabled bool) {
	e.t.Helper()
	if _, err := e.lambda.UpdateEventSourceMapping(context.Background(), &lambda.UpdateEventSourceMappingInput{UUID: aws.String(uuid), Enabled: aws.Bool(enabled)}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *migrationEnv) setQueue(attrs map[string]string) {
	e.t.Helper()
	if _, err := e.sqs.SetQueueAttributes(context.Background(), &sqs.SetQueueAttributesInput{QueueUrl: aws.String(e.queueURL), Attributes: attrs}); err != nil {
		e.t.Fatal(err)
	}
}

// checks runs preflight --json and returns each check's status by name.
func (e *migrationEnv) checks(args ...string) (map[string]string, result) {
	e.t.Helper()
	r := run(e.t, runOpts{}, append([]string{"preflight", "--json"}, args...)...)
	var rep struct {
		Checks []ops.Check `json:"checks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		e.t.Fatalf("preflight --json: %v\n%s", err, r.stdout)
	}
	got := map[string]string{}
	for _, c := range rep.Checks {
		got[c.Name] = string(c.Status)
	}
	return got, r
}

func wantChecks(t *testing.T, got map[string]string, want map[string]string) {
	t.Helper()
	for name, status := range want {
		if got[name] != status {
			t.Errorf("check %q: %q, want %q (all: %v)", name, got[name], status, got)
		}
	}
}

// TestPreflightOnAStackInFrontOfAConsumer runs preflight as the migration
// guide does: before the stack exists (queue and consumer), then against
// the stack deployed on moto_server, before and after the queue is fixed.
func TestPreflightOnAStackInFrontOfAConsumer(t *testing.T) {
	t.Parallel()
	// A queue as many are: a visibility timeout for a 10 s consumer, no
	// redrive policy, 4 days of retention.
	e := newMigrationEnv(t, map[string]string{"VisibilityTimeout": "60", "MessageRetentionPeriod": "345600"})
	sqsURL := e.queueURL

	// Before the stack: the queue and the consumer, with the timeout the
	// stack will have.
	got, r := e.checks("--main-queue", sqsURL, "--consumer", e.consumer, "--processor-timeout", "30")
	if r.code != ops.ExitCheckFailed {
		t.Errorf("preflight without the stack: exit %d, want %d", r.code, ops.ExitCheckFailed)
	}
	wantChecks(t, got, map[string]string{"visibility timeout": "FAIL", "redrive policy": "FAIL", "retention": "skip", "consumer timeout": "ok", "mappings": "ok"})

	// Against the stack: the same failures, in plain words, with the
	// commands that fix them and the stack's dead-letter queue in them.
	r = run(t, runOpts{}, "preflight", "--stack", e.st.Name)
	if r.code != ops.ExitCheckFailed {
		t.Fatalf("preflight --stack: exit %d, want %d", r.code, ops.ExitCheckFailed)
	}
	dlq := e.output("DeadLetterQueueArn")
	for _, want := range []string{
		"preflight of queue " + ops.QueueName(sqsURL) + " (" + sqsURL + "), stack " + e.st.Name + ", consumer " + e.consumer + ", region us-east-1\n" +
			"with stack " + e.st.Name + "'s ProcessorTimeout 30 s and ProcessorBatchingWindow 0 s\n",
		"FAIL  visibility timeout: 60 s, under 6 x ProcessorTimeout (30 s) + ProcessorBatchingWindow (0 s) = 180 s (3 minutes)",
		"change: aws sqs set-queue-attributes --region us-east-1 --endpoint-url " + mototest.URL(t) + " --queue-url " + sqsURL + " --attributes VisibilityTimeout=180",
		"FAIL  redrive policy: none",
		`--attributes '{"RedrivePolicy":"{\"deadLetterTargetArn\":\"` + dlq + `\",\"maxReceiveCount\":\"5\"}"}'`,
		"ok    target: the stack's processor delivers each message it holds to lambda:" + e.consumer,
		"ok    consumer timeout: " + e.consumer + " times out after 10 s",
		// Two checks fail: cutover would refuse, so the next step is their
		// fix, not the cutover.
		"ok    mappings: " + e.consumer + "'s mapping " + e.consumerMapping + " (Enabled) consumes " + ops.QueueName(sqsURL) +
			", the stack's mapping " + e.stackMapping() + " (Disabled) does not; not ready to cut over while visibility timeout, redrive policy fail (sqs-once cutover refuses); next: make the changes above, then sqs-once preflight --stack " + e.st.Name + " again\n",
		"ok    stack parameter: ProcessorMappingEnabled=false",
		"ok    replay age limit",
		"2 checks failed: make the changes above, then run this again.",
		"change it there too",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("preflight does not say %q", want)
		}
	}
	if !strings.Contains(r.stderr, "2 checks failed (visibility timeout, redrive policy)") {
		t.Errorf("stderr does not name the failed checks: %q", r.stderr)
	}
	if strings.Contains(r.stdout, "next: sqs-once cutover") || strings.Contains(r.stdout, "ready to cut over:") {
		t.Errorf("with checks failing, preflight says the cutover is next")
	}

	// The changes preflight printed, made: every check passes.
	e.setQueue(map[string]string{"VisibilityTimeout": "180", "RedrivePolicy": `{"deadLetterTargetArn":"` + dlq + `","maxReceiveCount":"5"}`})
	got, r = e.checks("--stack", e.st.Name)
	if r.code != ops.ExitOK {
		t.Errorf("preflight after the fixes: exit %d, want 0", r.code)
	}
	wantChecks(t, got, map[string]string{"visibility timeout": "ok", "redrive policy": "ok", "retention": "ok", "target": "ok", "consumer timeout": "ok", "mappings": "ok", "stack parameter": "ok", "replay age limit": "ok"})
	// Every check passing: now the cutover is next.
	r = run(t, runOpts{}, "preflight", "--stack", e.st.Name)
	if want := "ok    mappings: ready to cut over: " + e.consumer + "'s mapping " + e.consumerMapping + " (Enabled) consumes " + ops.QueueName(sqsURL) +
		", the stack's mapping " + e.stackMapping() + " (Disabled) does not; next: sqs-once cutover --stack " + e.st.Name + "\n"; r.code != ops.ExitOK || !strings.Contains(r.stdout, want) {
		t.Errorf("preflight with every check passing: exit %d, does not say %q", r.code, want)
	}

	// A retention too short for maxReceiveCount receives.
	e.setQueue(map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + dlq + `","maxReceiveCount":"100"}`, "MessageRetentionPeriod": "3600"})
	got, r = e.checks("--stack", e.st.Name)
	wantChecks(t, got, map[string]string{"retention": "FAIL", "replay age limit": "warn"})
	if r.code != ops.ExitCheckFailed {
		t.Errorf("a short retention: exit %d, want %d", r.code, ops.ExitCheckFailed)
	}

	// A redrive policy to another dead-letter queue.
	cfg := mototest.Config(t)
	other := mototest.QueueARN(t, cfg, mototest.NewQueue(t, cfg, false, nil))
	e.setQueue(map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + other + `","maxReceiveCount":5}`, "MessageRetentionPeriod": "345600"})
	got, _ = e.checks("--stack", e.st.Name)
	wantChecks(t, got, map[string]string{"redrive policy": "FAIL", "retention": "ok"})

	// A consumer slower than the processor can wait for.
	if _, err := e.lambda.UpdateFunctionConfiguration(context.Background(), &lambda.UpdateFunctionConfigurationInput{
		FunctionName: aws.String(e.consumer), Timeout: aws.Int32(60),
	}); err != nil {
		t.Fatal(err)
	}
	r = run(t, runOpts{}, "preflight", "--stack", e.st.Name)
	for _, want := range []string{
		"FAIL  consumer timeout: " + e.consumer + " times out after 60 s, and ProcessorTimeout (30 s) must outlast it by a tenth plus 2 s (68 s)",
		"change: deploy the stack with ProcessorTimeout=90, and set the queue's VisibilityTimeout to at least 6 x 90 + 0 = 540 s",
		"FAIL  visibility timeout: 180 s (3 minutes), at least 6 x ProcessorTimeout (30 s) + ProcessorBatchingWindow (0 s) = 180 s (3 minutes), but not 540 s (9 minutes) once ProcessorTimeout is 90, as the consumer needs",
		"or lower " + e.consumer + "'s timeout to at most 25 s",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("preflight does not say %q", want)
		}
	}

	// Another function consuming the queue fails the mappings check.
	stranger := mototest.NewFunction(t, cfg)
	if _, err := e.lambda.CreateEventSourceMapping(context.Background(), &lambda.CreateEventSourceMappingInput{
		FunctionName: aws.String(stranger), EventSourceArn: aws.String(e.queueARN), Enabled: aws.Bool(true),
	}); err != nil {
		t.Fatal(err)
	}
	r = run(t, runOpts{}, "preflight", "--stack", e.st.Name)
	if !strings.Contains(r.stdout, "FAIL  mappings: "+stranger+" also consumes "+ops.QueueName(sqsURL)) {
		t.Errorf("preflight does not name the other consumer %s", stranger)
	}

	// Flags that contradict the stack, or values the template refuses.
	for _, args := range [][]string{
		{"preflight", "--stack", e.st.Name, "--processor-timeout", "60"},
		{"preflight", "--main-queue", sqsURL, "--processor-timeout", "7"},
		{"preflight", "--main-queue", sqsURL, "--batching-window", "3"},
	} {
		if r := run(t, runOpts{}, args...); r.code != ops.ExitUsage {
			t.Errorf("sqs-once %s: exit %d, want %d", strings.Join(args, " "), r.code, ops.ExitUsage)
		}
	}
}

// TestCutoverSwapsTheMappings cuts a queue over from its consumer to the
// stack's processor and back, as the guide does, checking the mappings'
// states after each run, that a second run changes nothing, and that the
// drift of a consumer whose own deploy enables its mapping again is caught
// by preflight and undone by cutover.
func TestCutoverSwapsTheMappings(t *testing.T) {
	t.Parallel()
	e := newMigrationEnv(t, map[string]string{"VisibilityTimeout": "180", "MessageRetentionPeriod": "345600"})
	stackMapping := e.stackMapping()
	dlq := e.output("DeadLetterQueueArn")
	states := func() [2]string { return [2]string{e.state(e.consumerMapping), e.state(stackMapping)} }
	if got := states(); got != [2]string{"Enabled", "Disabled"} {
		t.Fatalf("before the cutover: consumer %s, stack %s; want Enabled, Disabled", got[0], got[1])
	}
	queue := ops.QueueName(e.queueURL)

	// Refused while a preflight check fails (no redrive policy): nothing
	// changes.
	r := run(t, runOpts{}, "cutover", "--stack", e.st.Name, "--yes")
	if r.code != ops.ExitRefused || !strings.Contains(r.stderr, "1 preflight check fails (redrive policy); nothing was changed") {
		t.Errorf("cutover with a failing check: exit %d, want %d naming the check", r.code, ops.ExitRefused)
	}
	if got := states(); got != [2]string{"Enabled", "Disabled"} {
		t.Errorf("a refused cutover changed the mappings: %v", got)
	}
	e.setQueue(map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + dlq + `","maxReceiveCount":"5"}`})

	// Not confirmed: nothing changes.
	r = run(t, runOpts{stdin: "n\n"}, "cutover", "--stack", e.st.Name)
	if r.code != ops.ExitRefused || !strings.Contains(r.stderr, "1. disable "+e.consumer+"'s mapping "+e.consumerMapping+" (Enabled now)") ||
		!strings.Contains(r.stderr, "2. enable the stack's mapping "+stackMapping+" (Disabled now)") {
		t.Errorf("cutover not confirmed: exit %d, want %d with the plan, consumer first", r.code, ops.ExitRefused)
	}
	if got := states(); got != [2]string{"Enabled", "Disabled"} {
		t.Errorf("an unconfirmed cutover changed the mappings: %v", got)
	}

	r = run(t, runOpts{stdin: "y\n"}, "cutover", "--stack", e.st.Name)
	if r.code != ops.ExitOK {
		t.Fatalf("cutover: exit %d", r.code)
	}
	if got := states(); got != [2]string{"Disabled", "Enabled"} {
		t.Errorf("after the cutover: consumer %s, stack %s; want Disabled, Enabled", got[0], got[1])
	}
	for _, want := range []string{
		"cutover of queue " + queue + " from " + e.consumer + " to the processor of stack " + e.st.Name + ", region us-east-1",
		"  disabled " + e.consumer + "'s mapping " + e.consumerMapping + " (was Enabled)\n  enabled the stack's mapping " + stackMapping + " (was Disabled)",
		"done: the processor of stack " + e.st.Name + " consumes " + queue + " and hands each message it holds to " + e.consumer,
		"deploy stack " + e.st.Name + " with ProcessorMappingEnabled=true from now on",
		"Back out with: sqs-once cutover --stack " + e.st.Name + " --rollback",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("cutover does not say %q", want)
		}
	}

	// Again: nothing to do, nothing asked.
	r = run(t, runOpts{}, "cutover", "--stack", e.st.Name)
	if r.code != ops.ExitOK || !strings.Contains(r.stdout, e.consumer+"'s mapping "+e.consumerMapping+": already Disabled") || !strings.Contains(r.stdout, "nothing changed") ||
		!strings.Contains(r.stdout, "the stack's mapping "+stackMapping+": already Enabled") || strings.Contains(r.stderr, "[y/N]") {
		t.Errorf("a second cutover: exit %d, want 0 with nothing changed and no question", r.code)
	}

	// Cut over, preflight passes but warns that the stack's parameter
	// still says false.
	got, r := e.checks("--stack", e.st.Name)
	wantChecks(t, got, map[string]string{"mappings": "ok", "stack parameter": "warn"})
	if r.code != ops.ExitOK {
		t.Errorf("preflight after the cutover: exit %d", r.code)
	}

	// Drift: the consumer's own deploy enables its mapping again.
	e.setMapping(e.consumerMapping, true)
	r = run(t, runOpts{}, "preflight", "--stack", e.st.Name)
	if r.code != ops.ExitCheckFailed || !strings.Contains(r.stdout, "FAIL  mappings: both consume "+queue) || !strings.Contains(r.stdout, "drift") {
		t.Errorf("preflight with both mappings enabled: exit %d, want %d and the drift named", r.code, ops.ExitCheckFailed)
	}
	r = run(t, runOpts{}, "cutover", "--stack", e.st.Name, "--yes")
	if r.code != ops.ExitOK || !strings.Contains(r.stdout, "disabled "+e.consumer+"'s mapping") {
		t.Errorf("cutover after drift: exit %d", r.code)
	}
	if got := states(); got != [2]string{"Disabled", "Enabled"} {
		t.Errorf("after the cutover that undid the drift: %v", got)
	}

	// Rollback: the stack's mapping off first, then the consumer's on.
	r = run(t, runOpts{}, "cutover", "--stack", e.st.Name, "--rollback", "--yes")
	if r.code != ops.ExitOK {
		t.Fatalf("rollback: exit %d", r.code)
	}
	if got := states(); got != [2]string{"Enabled", "Disabled"} {
		t.Errorf("after the rollback: consumer %s, stack %s; want Enabled, Disabled", got[0], got[1])
	}
	if !strings.Contains(r.stdout, "  disabled the stack's mapping "+stackMapping+" (was Enabled)\n  enabled "+e.consumer+"'s mapping "+e.consumerMapping+" (was Disabled)") ||
		!strings.Contains(r.stdout, "done: "+e.consumer+" consumes "+queue+" itself again") {
		t.Errorf("rollback output")
	}
	r = run(t, runOpts{}, "cutover", "--stack", e.st.Name, "--rollback")
	if r.code != ops.ExitOK || !strings.Contains(r.stdout, "already Disabled") {
		t.Errorf("a second rollback: exit %d, want 0 with nothing changed", r.code)
	}

	// --json says what each step did.
	r = run(t, runOpts{}, "cutover", "--stack", e.st.Name, "--yes", "--json")
	var rep struct {
		Steps []ops.CutoverStep `json:"steps"`
		Done  bool              `json:"done"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || !rep.Done || len(rep.Steps) != 2 ||
		rep.Steps[0].Whose != "consumer" || rep.Steps[0].Want != "Disabled" || !rep.Steps[0].Changed || rep.Steps[1].Whose != "stack" || rep.Steps[1].Want != "Enabled" {
		t.Errorf("cutover --json: %v %+v\n%s", err, rep, r.stdout)
	}
}

// TestMigrationValuesAreTheTemplates: the ProcessorTimeout and
// ProcessorBatchingWindow values preflight suggests and accepts are the
// template's, and the parameter cutover reads exists with the values it
// compares; the stack's mapping is created disabled with "false".
func TestMigrationValuesAreTheTemplates(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tmpl, err := samstack.Translate(ctx, filepath.Join("..", "..", "..", "..", "template.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	params := map[string]samstack.Parameter{}
	for _, p := range tmpl.Parameters() {
		params[p.Name] = p
	}
	asInts := func(vs []string) []int {
		var out []int
		for _, v := range vs {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, n)
		}
		return out
	}
	if got := asInts(params["ProcessorTimeout"].AllowedValues); !slices.Equal(got, ops.ProcessorTimeouts) {
		t.Errorf("ops.ProcessorTimeouts %v, the template allows %v", ops.ProcessorTimeouts, got)
	}
	if got := asInts(params["ProcessorBatchingWindow"].AllowedValues); !slices.Equal(got, ops.BatchingWindows) {
		t.Errorf("ops.BatchingWindows %v, the template allows %v", ops.BatchingWindows, got)
	}
	p, ok := params["ProcessorMappingEnabled"]
	if !ok || p.Default == nil || *p.Default != "true" || !slices.Equal(p.AllowedValues, []string{"true", "false"}) {
		t.Errorf("ProcessorMappingEnabled: %+v, want default true, allowed true and false", p)
	}
	es := tmpl.Resources()["ProcessorFunctionMainQueue"]
	if es.Type != "AWS::Lambda::EventSourceMapping" {
		t.Fatalf("ProcessorFunctionMainQueue is %q, not the processor's event source mapping", es.Type)
	}
	for value, want := range map[string]bool{"true": true, "false": false} {
		values, err := tmpl.ParameterValues(map[string]string{"ProcessorMappingEnabled": value})
		if err != nil {
			t.Fatal(err)
		}
		got, err := samstack.NewResolver(tmpl, values).Value(es.Properties["Enabled"])
		if err != nil || got != want {
			t.Errorf("ProcessorMappingEnabled=%s: the mapping's Enabled is %v (%v), want the boolean %v", value, got, err, want)
		}
	}
}

// TestNotFoundNamesTheRegionAndStack: a stack looked for in the wrong
// region, and a key missing from the stack's table, are reported with the
// region, the stack and the table.
func TestNotFoundNamesTheRegionAndStack(t *testing.T) {
	t.Parallel()
	st := stack(t)
	r := run(t, runOpts{}, "inspect", "--stack", st.Name, "--region", "eu-west-1", "k")
	if r.code != ops.ExitNotFound || !strings.Contains(r.stderr, "stack "+st.Name+" in region eu-west-1: not found") ||
		!strings.Contains(r.stderr, "looked in region eu-west-1, stack "+st.Name+". If it is elsewhere, give --region and --profile") {
		t.Errorf("a stack in another region: exit %d, want %d naming the region", r.code, ops.ExitNotFound)
	}
	key := mototest.Name("missing")
	r = run(t, runOpts{}, "inspect", "--stack", st.Name, key)
	table := output(t, "IdempotencyTableName")
	if r.code != ops.ExitNotFound || !strings.Contains(r.stderr, fmt.Sprintf("key %q (record id %s-processor#%s in table %s, region us-east-1): not found", key, st.Name, key, table)) ||
		!strings.Contains(r.stderr, "looked in region us-east-1, stack "+st.Name+", table "+table+".") {
		t.Errorf("a missing key: exit %d, want %d naming table, region and stack", r.code, ops.ExitNotFound)
	}
}
