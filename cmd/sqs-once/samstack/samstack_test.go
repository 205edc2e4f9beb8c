//go:build integration

package samstack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/samstack"
	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
)

func TestMain(m *testing.M) { mototest.Main(m) }

const app = "testdata/app.yaml"

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

func TestTranslate(t *testing.T) {
	t.Parallel()
	tmpl, err := samstack.Translate(ctx(t), app, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := tmpl.Resources()
	fn, ok := res["Worker"]
	if !ok || fn.Type != "AWS::Lambda::Function" {
		t.Fatalf("Worker is %+v, want an AWS::Lambda::Function", fn)
	}
	// Globals applied, local CodeUri packaged to the placeholder location.
	if got := fn.Properties["Code"]; !jsonEqual(got, map[string]any{"S3Bucket": "samstack-code", "S3Key": "code.zip"}) {
		t.Errorf("Code = %v, want the placeholder location %s", got, samstack.PlaceholderCodeURI)
	}
	if got := fn.Properties["Architectures"]; !jsonEqual(got, []any{"arm64"}) {
		t.Errorf("Architectures = %v, want [arm64] from Globals", got)
	}
	esm, ok := res["WorkerQueue"]
	if !ok || esm.Type != "AWS::Lambda::EventSourceMapping" {
		t.Fatalf("WorkerQueue is %+v, want the SQS event's mapping", esm)
	}
	// Short forms became long forms: !GetAtt Queue.Arn is a two-element list.
	if got := esm.Properties["EventSourceArn"]; !jsonEqual(got, map[string]any{"Fn::GetAtt": []any{"Queue", "Arn"}}) {
		t.Errorf("EventSourceArn = %v", got)
	}
	if role, ok := res["WorkerRole"]; !ok || role.Type != "AWS::IAM::Role" {
		t.Errorf("no generated WorkerRole: %+v", role)
	}
	// The unquoted format version stays a string, not a YAML date.
	if v := tmpl["AWSTemplateFormatVersion"]; v != "2010-09-09" {
		t.Errorf("AWSTemplateFormatVersion = %#v", v)
	}
}

func TestTranslateRejectsInvalidTemplate(t *testing.T) {
	t.Parallel()
	_, err := samstack.Translate(ctx(t), "testdata/invalid.yaml", nil)
	var te *samstack.TranslateError
	if !errors.As(err, &te) {
		t.Fatalf("err = %v, want a *TranslateError", err)
	}
	if len(te.Causes) == 0 || !strings.Contains(err.Error(), "Worker") {
		t.Errorf("error does not name the resource: %v", err)
	}
}

// TestTranslationCache counts the translator's runs (a python3 wrapper
// that notes each translation, not the version query): a translation is
// read back for the same template bytes, parameters and region, wherever
// the template file is, and made again when any of them changes, when the
// kept one is damaged, and always with the cache off.
func TestTranslationCache(t *testing.T) {
	// Not parallel: it sets the interpreter, the cache and the region for
	// the whole process.
	dir := t.TempDir()
	t.Setenv(samstack.CacheDirEnv, dir)
	t.Setenv(samstack.NoCacheEnv, "")
	t.Setenv("AWS_REGION", "us-east-1")
	calls := filepath.Join(t.TempDir(), "calls")
	wrapper := filepath.Join(t.TempDir(), "python-counting")
	script := "#!/bin/sh\ncase \"$2\" in *'Transform a SAM template'*) echo translation >> '" + calls + "';; esac\nexec python3 \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(samstack.PythonEnv, wrapper)
	runs := func() int {
		data, err := os.ReadFile(calls)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		return strings.Count(string(data), "translation")
	}
	translate := func(path string, params map[string]string, want int, why string) samstack.Template {
		t.Helper()
		tmpl, err := samstack.Translate(ctx(t), path, params)
		if err != nil {
			t.Fatal(err)
		}
		if got := runs(); got != want {
			t.Fatalf("%s: %d translator runs so far, want %d", why, got, want)
		}
		return tmpl
	}
	blue := map[string]string{"Label": "blue"}
	first := translate(app, blue, 1, "the first translation")
	if again := translate(app, blue, 1, "the same template and parameters"); !jsonEqual(again, first) {
		t.Error("the kept translation differs from the translator's")
	}
	translate(app, map[string]string{"Label": "green"}, 2, "another parameter value")
	data, err := os.ReadFile(app)
	if err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(copied, data, 0o644); err != nil {
		t.Fatal(err)
	}
	translate(copied, blue, 2, "the same bytes at another path")
	// The same length, one byte else: a key of the length alone misses it.
	changed := bytes.Replace(data, []byte("# A small"), []byte("# a small"), 1)
	if bytes.Equal(changed, data) {
		t.Fatal("testdata/app.yaml no longer starts with the comment the test changes")
	}
	if err := os.WriteFile(copied, changed, 0o644); err != nil {
		t.Fatal(err)
	}
	translate(copied, blue, 3, "changed template bytes")
	t.Setenv("AWS_REGION", "eu-west-1")
	translate(app, blue, 4, "another region")
	t.Setenv("AWS_REGION", "us-east-1")

	entries, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(entries) != 4 {
		t.Fatalf("%d entries kept (%v), want one per translation", len(entries), err)
	}
	for _, e := range entries {
		if err := os.WriteFile(e, []byte("{"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if damaged := translate(app, blue, 5, "a damaged entry"); !jsonEqual(damaged, first) {
		t.Error("the translation after a damaged entry differs from the first")
	}
	translate(app, blue, 5, "the entry written anew")

	t.Setenv(samstack.NoCacheEnv, "1")
	translate(app, blue, 6, "the cache off")
	translate(app, blue, 7, "the cache off, again")
}

func TestTranslateMissingTools(t *testing.T) {
	// Not parallel: it sets the interpreter for the whole process.
	t.Run("no interpreter", func(t *testing.T) {
		t.Setenv(samstack.PythonEnv, filepath.Join(t.TempDir(), "no-python"))
		_, err := samstack.Translate(ctx(t), app, nil)
		if !errors.Is(err, samstack.ErrToolMissing) || !strings.Contains(err.Error(), "pip install aws-sam-translator") {
			t.Fatalf("err = %v, want ErrToolMissing with the install hint", err)
		}
	})
	t.Run("no samtranslator", func(t *testing.T) {
		// A python3 without site-packages cannot import samtranslator.
		wrapper := filepath.Join(t.TempDir(), "python-bare")
		if err := os.WriteFile(wrapper, []byte("#!/bin/sh\nexec python3 -S \"$@\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Setenv(samstack.PythonEnv, wrapper)
		_, err := samstack.Translate(ctx(t), app, nil)
		if !errors.Is(err, samstack.ErrToolMissing) {
			t.Fatalf("err = %v, want ErrToolMissing", err)
		}
		if !strings.Contains(err.Error(), "missing Python package") {
			t.Errorf("error does not say which package is missing: %v", err)
		}
	})
}

func TestParameterValues(t *testing.T) {
	t.Parallel()
	tmpl, err := samstack.Translate(ctx(t), app, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		overrides map[string]string
		want      map[string]string
		errs      []string // each must appear in the error
		notErrs   []string // none may
	}{
		{name: "defaults", want: map[string]string{"Timeout": "5", "Retries": "3", "Mode": "fast", "Label": "", "BatchSize": "10", "Window": "0"}},
		{name: "overrides", overrides: map[string]string{"Timeout": "10", "Label": "abc", "BatchSize": "100", "Window": "1"},
			want: map[string]string{"Timeout": "10", "Retries": "3", "Mode": "fast", "Label": "abc", "BatchSize": "100", "Window": "1"}},
		// As CloudFormation compares them, and Fn::FindInMap its keys: "10.0"
		// would find no mapping entry "10".
		{name: "number allowed values compare as strings", overrides: map[string]string{"Timeout": "10.0"},
			errs: []string{"parameter Timeout: 10.0 is not one of 5, 10"}},
		{name: "a number in range need not be written canonically", overrides: map[string]string{"Retries": "04"},
			want: map[string]string{"Timeout": "5", "Retries": "04", "Mode": "fast", "Label": "", "BatchSize": "10", "Window": "0"}},
		{name: "every bad value is named", overrides: map[string]string{"Timeout": "7", "Retries": "11", "Mode": "slow", "Label": "ABC", "Nope": "1"},
			errs: []string{"parameter Timeout: 7 is not one of 5, 10", "parameter Retries: 11 is above MaxValue 10", `parameter Mode: "slow" is not one of fast, safe`,
				`parameter Label: "ABC" does not match`, "parameter Nope: the template has no such parameter"},
			notErrs: []string{"Nope: the template has no such parameter; did you mean"}},
		// A misspelt name is refused with the one meant; each of several,
		// in sorted order.
		{name: "misspelt names suggest the closest", overrides: map[string]string{"Timout": "5", "retries": "3", "BatchSize": "10"},
			errs: []string{"parameter Timout: the template has no such parameter; did you mean Timeout?\nparameter retries: the template has no such parameter; did you mean Retries?"}},
		{name: "not a number", overrides: map[string]string{"Retries": "three"}, errs: []string{`parameter Retries: "three" is not a number`}},
		{name: "below minimum", overrides: map[string]string{"Retries": "0"}, errs: []string{"parameter Retries: 0 is below MinValue 1"}},
		{name: "pattern matches the whole value", overrides: map[string]string{"Label": "abc1"}, errs: []string{"does not match AllowedPattern"}},
		{name: "rule", overrides: map[string]string{"BatchSize": "100"}, errs: []string{"rule BigBatchNeedsWindow: BatchSize above 10 needs a Window"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tmpl.ParameterValues(tt.overrides)
			if len(tt.errs) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if !jsonEqual(got, tt.want) {
					t.Errorf("values = %v, want %v", got, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, values %v", got)
			}
			for _, e := range tt.errs {
				if !strings.Contains(err.Error(), e) {
					t.Errorf("error %q\ndoes not contain %q", err, e)
				}
			}
			for _, e := range tt.notErrs {
				if strings.Contains(err.Error(), e) {
					t.Errorf("error %q\ncontains %q", err, e)
				}
			}
		})
	}
}

func TestConditions(t *testing.T) {
	t.Parallel()
	tmpl, err := samstack.Translate(ctx(t), app, nil)
	if err != nil {
		t.Fatal(err)
	}
	for label, want := range map[string]bool{"": false, "abc": true} {
		values, err := tmpl.ParameterValues(map[string]string{"Label": label})
		if err != nil {
			t.Fatal(err)
		}
		got, err := tmpl.Conditions(values)
		if err != nil {
			t.Fatal(err)
		}
		if got["HasLabel"] != want {
			t.Errorf("Label %q: HasLabel = %v, want %v", label, got["HasLabel"], want)
		}
	}
}

func TestDeploy(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	name := mototest.Name("app")
	st, err := samstack.Deploy(ctx(t), cfg, name, app, map[string]string{"Timeout": "10", "Retries": "4", "Label": "blue"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != "CREATE_COMPLETE" {
		t.Errorf("status %s", st.Status)
	}
	for _, a := range st.Adaptations {
		t.Log(a)
	}

	fn, ok := st.Functions["Worker"]
	if !ok {
		t.Fatalf("no Worker function among %v", st.Functions)
	}
	// Read back from Lambda: the Number parameter arrives as a string, the
	// condition picked the parameter, the table Ref is the physical name.
	wantEnv := map[string]string{"TABLE": st.Resources["Table"].PhysicalID, "RETRIES": "4", "MODE": "fast", "LABEL": "blue", "WINDOW": "0"}
	if !jsonEqual(fn.Env, wantEnv) {
		t.Errorf("env = %v, want %v", fn.Env, wantEnv)
	}
	if fn.Timeout != 10*time.Second {
		t.Errorf("timeout %v, want 10s", fn.Timeout)
	}

	queueURL, err := st.Output("QueueUrl")
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := sqs.NewFromConfig(cfg).GetQueueAttributes(ctx(t), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(queueURL), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The mapping key came from the Number parameter (rewritten for moto).
	if got := attrs.Attributes["VisibilityTimeout"]; got != "60" {
		t.Errorf("VisibilityTimeout = %s, want 60 from the mapping", got)
	}
	dlq, err := sqs.NewFromConfig(cfg).GetQueueAttributes(ctx(t), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(st.Resources["Dlq"].PhysicalID), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatal(err)
	}
	var redrive struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
		MaxReceiveCount     int    `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(attrs.Attributes["RedrivePolicy"]), &redrive); err != nil ||
		redrive.MaxReceiveCount != 4 || redrive.DeadLetterTargetArn != dlq.Attributes["QueueArn"] {
		t.Errorf("RedrivePolicy = %s (%v), want the Dlq after 4 receives", attrs.Attributes["RedrivePolicy"], err)
	}

	es, ok := fn.EventSource(attrs.Attributes["QueueArn"])
	if !ok {
		t.Fatalf("no event source for the queue: %+v", fn.EventSources)
	}
	if es.State != "Disabled" || es.BatchSize != 10 || !slices.Equal(es.FunctionResponseTypes, []string{"ReportBatchItemFailures"}) {
		t.Errorf("event source = %+v, want disabled, batch 10, ReportBatchItemFailures", es)
	}

	ttl, err := dynamodb.NewFromConfig(cfg).DescribeTimeToLive(ctx(t), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(st.Resources["Table"].PhysicalID)})
	if err != nil {
		t.Fatal(err)
	}
	if d := ttl.TimeToLiveDescription; d.TimeToLiveStatus != ddbtypes.TimeToLiveStatusEnabled || aws.ToString(d.AttributeName) != "expiresAt" {
		t.Errorf("TTL = %+v, want enabled on expiresAt", d)
	}

	// Every gap is reported, none hidden.
	want := []string{
		"rewritten Queue.Fn::FindInMap",
		"rewritten Worker.Environment.Variables",
		"applied Table.TimeToLiveSpecification",
		"missing Alarm: not created",
		"missing Worker.Architectures",
		"disabled WorkerQueue.Enabled",
	}
	var got []string
	for _, a := range st.Adaptations {
		got = append(got, a.String())
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, w) }) {
			t.Errorf("adaptations %q\nlack %q", got, w)
		}
	}
}

func TestDeployRejectsBadParametersBeforeCreating(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	name := mototest.Name("bad")
	_, err := samstack.Deploy(ctx(t), cfg, name, app, map[string]string{"BatchSize": "100"})
	if err == nil || !strings.Contains(err.Error(), "rule BigBatchNeedsWindow") {
		t.Fatalf("err = %v, want the rule's description", err)
	}
	if _, err := cloudformation.NewFromConfig(cfg).DescribeStacks(ctx(t), &cloudformation.DescribeStacksInput{StackName: aws.String(name)}); err == nil {
		t.Error("the stack was created despite the bad parameters")
	}
}

// TestDeployTakesItsOwnRetriedStack has the endpoint apply CreateStack and
// then fail its answer, as a loaded moto_server (or a lost connection) does:
// the SDK retries, the retry finds the stack the first attempt created, and
// Deploy goes on with it instead of failing with AlreadyExistsException.
func TestDeployTakesItsOwnRetriedStack(t *testing.T) {
	t.Parallel()
	for _, fault := range []faultproxy.Fault{faultproxy.FailAfter, faultproxy.ResetAfter} {
		t.Run(fault.String(), func(t *testing.T) {
			t.Parallel()
			p, err := faultproxy.Start(mototest.URL(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			p.Script("CreateStack", fault)
			cfg := mototest.Config(t)
			cfg.BaseEndpoint = aws.String(p.URL)
			st, err := samstack.Deploy(ctx(t), cfg, mototest.Name("retried"), app, map[string]string{"Timeout": "10"})
			if err != nil {
				t.Fatalf("Deploy after a CreateStack applied and answered %v: %v", fault, err)
			}
			if p.Pending() != 0 {
				t.Fatalf("the %v fault was never injected", fault)
			}
			if st.Status != "CREATE_COMPLETE" {
				t.Errorf("status %s", st.Status)
			}
		})
	}
}

// TestDeployRefusesAnotherStackOfTheSameName: a stack of that name that
// this Deploy did not create is not taken for its own.
func TestDeployRefusesAnotherStackOfTheSameName(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	name := mototest.Name("taken")
	if _, err := samstack.Deploy(ctx(t), cfg, name, app, map[string]string{"Timeout": "10"}); err != nil {
		t.Fatal(err)
	}
	_, err := samstack.Deploy(ctx(t), cfg, name, app, map[string]string{"Timeout": "10"})
	var exists *cftypes.AlreadyExistsException
	if !errors.As(err, &exists) {
		t.Fatalf("second Deploy of %s: err = %v, want AlreadyExistsException", name, err)
	}
}

func TestDeployRefusesAWS(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	cfg.BaseEndpoint = nil
	if _, err := samstack.Deploy(ctx(t), cfg, mototest.Name("aws"), app, nil); !errors.Is(err, samstack.ErrNotLocal) {
		t.Fatalf("err = %v, want ErrNotLocal", err)
	}
}

func TestDescribeUnknownStack(t *testing.T) {
	t.Parallel()
	_, err := samstack.Describe(ctx(t), mototest.Config(t), mototest.Name("none"))
	if err == nil {
		t.Fatal("no error for a stack that does not exist")
	}
}
