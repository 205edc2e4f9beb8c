//go:build integration

package templatetest

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/samstack"
	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// TestTargetPattern: Target's AllowedPattern gives each value the verdict
// targets.ParseSpec, the processor's own reader of TARGET, gives it,
// except where the template is narrower on purpose (then why says so).
func TestTargetPattern(t *testing.T) {
	t.Parallel()
	var p samstack.Parameter
	for _, q := range translatedTemplate(t).Parameters() {
		if q.Name == "Target" {
			p = q
		}
	}
	if p.AllowedPattern == "" {
		t.Fatal("no parameter Target with an AllowedPattern")
	}
	name64 := strings.Repeat("f", 64)
	tests := []struct {
		value string
		ok    bool
		// narrower: the processor accepts the value, the template refuses
		// it, for this reason.
		narrower string
	}{
		{value: "", ok: true}, // the built-in handler
		{value: "lambda:consumer", ok: true},
		{value: "lambda:consumer:live", ok: true},
		{value: "lambda:consumer:7", ok: true},
		{value: "lambda:consumer:$LATEST", ok: true},
		{value: "lambda:" + name64, ok: true},
		{value: "lambda:arn", ok: true}, // a function named arn
		{value: "lambda:123456789012:function", ok: true},
		{value: "lambda:123456789012:function:consumer", ok: true},
		{value: "lambda:123456789012:function:consumer:live", ok: true},
		{value: "lambda:arn:aws:lambda:eu-west-1:111122223333:function:consumer", ok: true},
		{value: "lambda:arn:aws:lambda:eu-west-1:111122223333:function:consumer:live", ok: true},
		{value: "lambda:arn:aws-cn:lambda:cn-north-1:111122223333:function:consumer", ok: true},
		{value: "lambda:arn:aws-us-gov:lambda:us-gov-west-1:111122223333:function:consumer:3", ok: true},
		{value: "sqs:https://sqs.us-east-1.amazonaws.com/123456789012/orders", ok: true},
		{value: "sqs:https://sqs.eu-west-1.amazonaws.com/111122223333/orders.fifo", ok: true},
		{value: "sqs:https://sqs.cn-north-1.amazonaws.com.cn/111122223333/orders", ok: true},
		{value: "sns:arn:aws:sns:us-east-1:123456789012:orders", ok: true},
		{value: "sns:arn:aws:sns:eu-west-1:111122223333:orders.fifo", ok: true},
		{value: "events:default", ok: true},
		{value: "events:orders-bus", ok: true},
		{value: "events:arn", ok: true}, // a bus named arn
		{value: "events:aws.partner/example.com/123/orders", ok: true},
		{value: "events:arn:aws:events:eu-west-1:111122223333:event-bus/orders", ok: true},
		{value: "states:arn:aws:states:us-east-1:123456789012:stateMachine:orders", ok: true},
		{value: "states:arn:aws-cn:states:cn-north-1:111122223333:stateMachine:Orders.v2_(eu)@x", ok: true},
		{value: "states:arn:aws:states:us-east-1:123456789012:stateMachine:" + strings.Repeat("s", 80), ok: true},
		{value: "durable:orders:live", ok: true},
		{value: "durable:orders:7", ok: true},
		{value: "durable:" + name64 + ":live", ok: true},
		{value: "durable:arn:live", ok: true},              // a function named arn
		{value: "durable:123456789012:function", ok: true}, // a function named with 12 digits, alias function
		{value: "durable:123456789012:function:orders:live", ok: true},
		{value: "durable:arn:aws:lambda:eu-west-1:111122223333:function:orders:3", ok: true},
		{value: "durable:arn:aws-us-gov:lambda:us-gov-west-1:111122223333:function:orders:live", ok: true},

		{value: "lambda", ok: false},
		{value: "lambda:", ok: false},
		{value: "Lambda:consumer", ok: false},
		{value: " lambda:consumer", ok: false},
		{value: "lambda:" + name64 + "f", ok: false},
		{value: "lambda:con sumer", ok: false},
		{value: "lambda:consumer:live:7", ok: false},
		{value: "lambda:consumer:", ok: false},
		{value: "lambda:12345:function:consumer", ok: false},
		{value: "lambda:arn:aws:lambda:eu-west-1:111122223333:function:", ok: false},
		{value: "lambda:arn:aws:lambda:eu-west-1:11112222333:function:consumer", ok: false},
		{value: "lambda:arn:aws:sqs:eu-west-1:111122223333:function:consumer", ok: false},
		{value: "sqs:", ok: false},
		{value: "sqs:orders", ok: false},
		{value: "sqs:https://sqs.us-east-1.amazonaws.com/orders", ok: false},
		{value: "sqs:https://sqs.us-east-1.amazonaws.com/123456789012/orders?x=1", ok: false},
		{value: "sqs:https://sqs.us-east-1.amazonaws.com/123456789012/orders/", ok: false},
		{value: "sqs:ftp://sqs.us-east-1.amazonaws.com/123456789012/orders", ok: false},
		{value: "sns:orders", ok: false},
		{value: "sns:arn:aws:sns:us-east-1:123456789012:", ok: false},
		{value: "sns:arn:aws:sqs:us-east-1:123456789012:orders", ok: false},
		{value: "events:", ok: false},
		{value: "events:orders bus", ok: false},
		{value: "events:arn:aws:events:us-east-1:123456789012:rule/orders", ok: false},
		{value: "kinesis:orders", ok: false},
		{value: "states:", ok: false},
		{value: "states:orders", ok: false},
		{value: "states:arn:aws:states:us-east-1:123456789012:stateMachine:", ok: false},
		{value: "states:arn:aws:states:us-east-1:123456789012:stateMachine:" + strings.Repeat("s", 81), ok: false},
		{value: "states:arn:aws:states:us-east-1:123456789012:stateMachine:orders:live", ok: false},
		{value: "states:arn:aws:states:us-east-1:123456789012:stateMachine:or*", ok: false},
		{value: "states:arn:aws:states:us-east-1:123456789012:execution:orders:x", ok: false},
		{value: "states:arn:aws:states:us-east-1:12345678901:stateMachine:orders", ok: false},
		{value: "durable:orders", ok: false}, // unqualified
		{value: "durable:orders:$LATEST", ok: false},
		{value: "durable:orders:", ok: false},
		{value: "durable:orders:live:7", ok: false},
		{value: "durable:123456789012:function:orders", ok: false},
		{value: "durable:arn:aws:lambda:eu-west-1:111122223333:function:orders", ok: false},
		{value: "durable:arn:aws:lambda:eu-west-1:111122223333:function:orders:$LATEST", ok: false},
		{value: "Durable:orders:live", ok: false},

		{value: "sqs:http://localhost:4566/000000000000/orders", narrower: "not SQS's endpoint: no queue ARN to grant sqs:SendMessage on"},
		{value: "sqs:https://queue.amazonaws.com/123456789012/orders", narrower: "SQS's legacy endpoint: the region is not in the host"},
		{value: "sqs:https://vpce-0a1b2c3d-4e5f6a7b.sqs.us-east-1.vpce.amazonaws.com/123456789012/orders", narrower: "a VPC endpoint's host: the template would derive no region"},
		{value: "sqs:https://sqs.us-east-1.amazonaws.com/orders/123456789012", narrower: "no 12-digit account where the queue ARN needs one"},
		{value: "sqs:https://sqs.us-east-1.amazonaws.com/123456789012/ord%20ers", narrower: "not a valid queue name"},
	}
	for _, tt := range tests {
		tmplErr := p.Check(tt.value)
		spec, specErr := targets.ParseSpec(tt.value)
		if tt.value == "" {
			// No target: targets.FromEnv never calls ParseSpec for it.
			specErr = nil
		}
		wantTmpl, wantSpec := tt.ok, tt.ok
		if tt.narrower != "" {
			wantTmpl, wantSpec = false, true
		}
		if (tmplErr == nil) != wantTmpl {
			t.Errorf("%q: template accepts %v, want %v (%v)", tt.value, tmplErr == nil, wantTmpl, tmplErr)
		}
		if (specErr == nil) != wantSpec {
			t.Errorf("%q: targets.ParseSpec accepts %v, want %v (%v)", tt.value, specErr == nil, wantSpec, specErr)
		}
		if specErr == nil && tt.value != "" && spec.String() != tt.value {
			t.Errorf("%q: ParseSpec reads it as %q", tt.value, spec.String())
		}
		if tmplErr != nil {
			continue
		}
		// What the template lets through, the processor starts with.
		env := map[string]string{"IDEMPOTENCY_TABLE": "t", "AWS_LAMBDA_FUNCTION_NAME": "fn", "TARGET": tt.value}
		if err := loaders[processorID](envconfig.Map(env)); err != nil {
			t.Errorf("%q: the template accepts it, the processor refuses it: %v", tt.value, err)
		}
	}
}

// The pseudo parameters the static tests resolve the template with.
var staticPseudo = map[string]string{
	"AWS::StackName": "stack", "AWS::Region": "us-east-1", "AWS::AccountId": "123456789012", "AWS::Partition": "aws",
	"AWS::URLSuffix": "amazonaws.com",
}

// targetCase is a Target (and its KMS key) with the permissions it must add
// to the processor's role, exactly; ${AWS::Region} and ${AWS::AccountId}
// stand for the stack's.
type targetCase struct {
	name   string
	params map[string]string
	grants []grant
}

func lambdaGrants(arn string) []grant {
	return []grant{{"lambda:InvokeFunction", arn}, {"lambda:InvokeFunction", arn + ":*"}}
}

// durableGrants are a durable target's: Invoke on the qualified function,
// the listing of its executions by that qualifier and without, and the
// reading of any of its executions (whose ARN names the version an alias
// resolves to).
func durableGrants(function, qualifier string) []grant {
	return []grant{
		{"lambda:InvokeFunction", function + ":" + qualifier},
		{"lambda:ListDurableExecutionsByFunction", function},
		{"lambda:ListDurableExecutionsByFunction", function + ":" + qualifier},
		{"lambda:GetDurableExecution", function + ":*/durable-execution/*"},
	}
}

const kmsKey = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"

var targetCases = []targetCase{
	{name: "none", params: map[string]string{"Target": ""}},
	{name: "none, KMS key given", params: map[string]string{"Target": "", "TargetKmsKeyArn": kmsKey}},
	{name: "lambda by name", params: map[string]string{"Target": "lambda:consumer"},
		grants: lambdaGrants("arn:aws:lambda:${AWS::Region}:${AWS::AccountId}:function:consumer")},
	{name: "lambda by name with alias", params: map[string]string{"Target": "lambda:consumer:live"},
		grants: lambdaGrants("arn:aws:lambda:${AWS::Region}:${AWS::AccountId}:function:consumer")},
	{name: "lambda named arn", params: map[string]string{"Target": "lambda:arn"},
		grants: lambdaGrants("arn:aws:lambda:${AWS::Region}:${AWS::AccountId}:function:arn")},
	{name: "lambda named with 12 digits, alias function", params: map[string]string{"Target": "lambda:123456789012:function"},
		grants: lambdaGrants("arn:aws:lambda:${AWS::Region}:${AWS::AccountId}:function:123456789012")},
	{name: "lambda by partial ARN with version", params: map[string]string{"Target": "lambda:111122223333:function:consumer:7"},
		grants: lambdaGrants("arn:aws:lambda:${AWS::Region}:111122223333:function:consumer")},
	{name: "lambda by ARN", params: map[string]string{"Target": "lambda:arn:aws:lambda:eu-west-1:111122223333:function:consumer"},
		grants: lambdaGrants("arn:aws:lambda:eu-west-1:111122223333:function:consumer")},
	{name: "lambda by ARN with alias", params: map[string]string{"Target": "lambda:arn:aws:lambda:eu-west-1:111122223333:function:consumer:live"},
		grants: lambdaGrants("arn:aws:lambda:eu-west-1:111122223333:function:consumer")},
	{name: "lambda by ARN in another partition", params: map[string]string{"Target": "lambda:arn:aws-cn:lambda:cn-north-1:111122223333:function:consumer"},
		grants: lambdaGrants("arn:aws-cn:lambda:cn-north-1:111122223333:function:consumer")},
	{name: "sqs", params: map[string]string{"Target": "sqs:https://sqs.eu-west-1.amazonaws.com/111122223333/orders"},
		grants: []grant{{"sqs:SendMessage", "arn:aws:sqs:eu-west-1:111122223333:orders"}}},
	{name: "sqs FIFO", params: map[string]string{"Target": "sqs:https://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo"},
		grants: []grant{{"sqs:SendMessage", "arn:aws:sqs:us-east-1:123456789012:orders.fifo"}}},
	{name: "sqs with KMS key", params: map[string]string{"Target": "sqs:https://sqs.eu-west-1.amazonaws.com/111122223333/orders", "TargetKmsKeyArn": kmsKey},
		grants: []grant{{"sqs:SendMessage", "arn:aws:sqs:eu-west-1:111122223333:orders"}, {"kms:GenerateDataKey", kmsKey}, {"kms:Decrypt", kmsKey}}},
	{name: "sns", params: map[string]string{"Target": "sns:arn:aws:sns:eu-west-1:111122223333:orders"},
		grants: []grant{{"sns:Publish", "arn:aws:sns:eu-west-1:111122223333:orders"}}},
	{name: "sns FIFO with KMS key", params: map[string]string{"Target": "sns:arn:aws:sns:eu-west-1:111122223333:orders.fifo", "TargetKmsKeyArn": kmsKey},
		grants: []grant{{"sns:Publish", "arn:aws:sns:eu-west-1:111122223333:orders.fifo"}, {"kms:GenerateDataKey", kmsKey}, {"kms:Decrypt", kmsKey}}},
	{name: "events by name", params: map[string]string{"Target": "events:orders"},
		grants: []grant{{"events:PutEvents", "arn:aws:events:${AWS::Region}:${AWS::AccountId}:event-bus/orders"}}},
	{name: "events, the default bus", params: map[string]string{"Target": "events:default"},
		grants: []grant{{"events:PutEvents", "arn:aws:events:${AWS::Region}:${AWS::AccountId}:event-bus/default"}}},
	{name: "events, a bus named arn", params: map[string]string{"Target": "events:arn"},
		grants: []grant{{"events:PutEvents", "arn:aws:events:${AWS::Region}:${AWS::AccountId}:event-bus/arn"}}},
	{name: "events, a partner bus by name", params: map[string]string{"Target": "events:aws.partner/example.com/123/orders"},
		grants: []grant{{"events:PutEvents", "arn:aws:events:${AWS::Region}:${AWS::AccountId}:event-bus/aws.partner/example.com/123/orders"}}},
	{name: "events by ARN", params: map[string]string{"Target": "events:arn:aws:events:eu-west-1:111122223333:event-bus/orders"},
		grants: []grant{{"events:PutEvents", "arn:aws:events:eu-west-1:111122223333:event-bus/orders"}}},
	{name: "durable by name with alias", params: map[string]string{"Target": "durable:orders:live"},
		grants: durableGrants("arn:aws:lambda:${AWS::Region}:${AWS::AccountId}:function:orders", "live")},
	{name: "durable named arn", params: map[string]string{"Target": "durable:arn:live"},
		grants: durableGrants("arn:aws:lambda:${AWS::Region}:${AWS::AccountId}:function:arn", "live")},
	{name: "durable named with 12 digits, alias function", params: map[string]string{"Target": "durable:123456789012:function"},
		grants: durableGrants("arn:aws:lambda:${AWS::Region}:${AWS::AccountId}:function:123456789012", "function")},
	{name: "durable by partial ARN with version", params: map[string]string{"Target": "durable:111122223333:function:orders:7"},
		grants: durableGrants("arn:aws:lambda:${AWS::Region}:111122223333:function:orders", "7")},
	{name: "durable by ARN with version", params: map[string]string{"Target": "durable:arn:aws:lambda:eu-west-1:111122223333:function:orders:3"},
		grants: durableGrants("arn:aws:lambda:eu-west-1:111122223333:function:orders", "3")},
	{name: "durable by ARN in another partition", params: map[string]string{"Target": "durable:arn:aws-cn:lambda:cn-north-1:111122223333:function:orders:live"},
		grants: durableGrants("arn:aws-cn:lambda:cn-north-1:111122223333:function:orders", "live")},
	{name: "states", params: map[string]string{"Target": "states:arn:aws:states:eu-west-1:111122223333:stateMachine:orders"},
		grants: statesGrants("arn:aws:states:eu-west-1:111122223333", "orders")},
	{name: "states in another partition", params: map[string]string{"Target": "states:arn:aws-cn:states:cn-north-1:111122223333:stateMachine:Orders.v2"},
		grants: statesGrants("arn:aws-cn:states:cn-north-1:111122223333", "Orders.v2")},
}

// statesGrants are a states target's: StartExecution on the state machine,
// DescribeExecution on its executions, nothing on other state machines.
func statesGrants(prefix, name string) []grant {
	return []grant{
		{"states:StartExecution", prefix + ":stateMachine:" + name},
		{"states:DescribeExecution", prefix + ":execution:" + name + ":*"},
	}
}

// expected is the case's grants in a stack of that region and account.
func (c targetCase) expected(region, account string) []grant {
	r := strings.NewReplacer("${AWS::Region}", region, "${AWS::AccountId}", account)
	out := make([]grant, 0, len(c.grants))
	for _, g := range c.grants {
		out = append(out, grant{g.Action, r.Replace(g.Resource)})
	}
	return out
}

// TestTargetPolicies resolves the processor role's policies of the
// translated template as CloudFormation would for each Target: besides the
// grants the role has without a Target, it holds exactly the target's
// actions on exactly its ARN, and nothing when Target is empty.
func TestTargetPolicies(t *testing.T) {
	t.Parallel()
	tmpl := translatedTemplate(t)
	role := roleOf(t, tmpl, processorID)
	base := resolvedGrants(t, tmpl, role, nil)
	if len(base) == 0 {
		t.Fatal("the processor's role has no grants without a Target")
	}
	// Without a Target, what is left is what TestLeastPrivilege checks:
	// every policy that is not a Target's (the defaults install every
	// component, so the others are all there).
	var unconditional []any
	for _, pol := range asSlice(tmpl.Resources()[role].Properties["Policies"]) {
		if fn, args, _ := samstack.Intrinsic(pol); fn != "Fn::If" || !targetConditions[asString(asSlice(args)[0])] {
			unconditional = append(unconditional, pol)
		}
	}
	values, err := tmpl.ParameterValues(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(resolvedPolicies(t, tmpl, role, values)), len(unconditional); got != want {
		t.Errorf("without a Target the role has %d policies, want the %d unconditional ones", got, want)
	}

	for _, tc := range targetCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.params["Target"] != "" {
				spec, err := targets.ParseSpec(tc.params["Target"])
				if err != nil {
					t.Fatalf("the processor refuses this Target: %v", err)
				}
				// The function granted is the one the processor calls.
				if spec.Kind == targets.Durable {
					arn := tc.grants[0].Resource
					parts := strings.Split(arn, ":")
					if name, q := parts[len(parts)-2], parts[len(parts)-1]; name != spec.FunctionName() || q != spec.Qualifier() {
						t.Errorf("granted Invoke on %s:%s, the processor invokes %s:%s", name, q, spec.FunctionName(), spec.Qualifier())
					}
				}
				if spec.Kind == targets.Lambda {
					arn := tc.grants[0].Resource
					if name := arn[strings.LastIndex(arn, ":")+1:]; name != spec.FunctionName() {
						t.Errorf("granted function %q, the processor calls %q", name, spec.FunctionName())
					}
				}
			}
			got := resolvedGrants(t, tmpl, role, tc.params)
			for _, g := range base {
				if !slices.Contains(got, g) {
					t.Errorf("lost %s on %s", g.Action, g.Resource)
				}
			}
			added := slices.DeleteFunc(slices.Clone(got), func(g grant) bool { return slices.Contains(base, g) })
			want := tc.expected(staticPseudo["AWS::Region"], staticPseudo["AWS::AccountId"])
			if !sameGrants(added, want) {
				t.Errorf("Target %q, TargetKmsKeyArn %q adds\n%v\nwant\n%v", tc.params["Target"], tc.params["TargetKmsKeyArn"], added, want)
			}
		})
	}
}

// TestTargetGrantsMatchTheClients: the actions TestTargetPolicies wants for
// each kind are exactly those of the calls its Target makes, read from the
// narrow client interface each Target type holds (as TestLeastPrivilege does
// for the rest of the code), so a new call without a grant fails here.
func TestTargetGrantsMatchTheClients(t *testing.T) {
	t.Parallel()
	clients := map[string]reflect.Type{
		"lambda": reflect.TypeFor[targets.LambdaTarget](),
		"sqs":    reflect.TypeFor[targets.SQSTarget](),
		"sns":    reflect.TypeFor[targets.SNSTarget](),
		"events": reflect.TypeFor[targets.EventsTarget](),
		"states": reflect.TypeFor[targets.StateMachineTarget](),
		// A Lambda durable function: the durable target's calls are Lambda's.
		"durable": reflect.TypeFor[targets.DurableTarget](),
	}
	// How IAM authorises each call: a batch call as its single form, and
	// Lambda's Invoke as lambda:InvokeFunction.
	action := func(service, method string) string {
		if service == "durable" {
			service = "lambda"
		}
		if service == "lambda" && method == "Invoke" {
			return "lambda:InvokeFunction"
		}
		return service + ":" + strings.TrimSuffix(method, "Batch")
	}
	for kind, typ := range clients {
		f, ok := typ.FieldByName("API")
		if !ok || f.Type.Kind() != reflect.Interface {
			t.Errorf("%s has no API interface field: this test reads the calls from it", typ)
			continue
		}
		var calls []string
		for i := range f.Type.NumMethod() {
			calls = append(calls, action(kind, f.Type.Method(i).Name))
		}
		calls = slices.Compact(slices.Sorted(slices.Values(calls)))
		for _, tc := range targetCases {
			if !strings.HasPrefix(tc.params["Target"], kind+":") {
				continue
			}
			var granted []string
			for _, g := range tc.grants {
				if !strings.HasPrefix(g.Action, "kms:") {
					granted = append(granted, g.Action)
				}
			}
			if granted = slices.Compact(slices.Sorted(slices.Values(granted))); !slices.Equal(granted, calls) {
				t.Errorf("%s: grants %v, the %s target calls %v (%s)", tc.name, granted, kind, calls, f.Type)
			}
		}
	}
}

func sameGrants(a, b []grant) bool {
	cmp := func(x, y grant) int { return strings.Compare(x.Action+" "+x.Resource, y.Action+" "+y.Resource) }
	return slices.Equal(slices.SortedFunc(slices.Values(a), cmp), slices.SortedFunc(slices.Values(b), cmp))
}

// roleOf returns the logical id of the role SAM generates for a function.
func roleOf(t *testing.T, tmpl samstack.Template, fnID string) string {
	t.Helper()
	att := asSlice(asMap(tmpl.Resources()[fnID].Properties["Role"])["Fn::GetAtt"])
	if len(att) != 2 || tmpl.Resources()[asString(att[0])].Type != "AWS::IAM::Role" {
		t.Fatalf("%s.Role = %s, want Fn::GetAtt of a role of the stack", fnID, js(tmpl.Resources()[fnID].Properties["Role"]))
	}
	return asString(att[0])
}

// resolvedGrants returns the Allow grants of a role's policies with the
// given parameters (overrides of the defaults).
func resolvedGrants(t *testing.T, tmpl samstack.Template, role string, params map[string]string) []grant {
	t.Helper()
	values, err := tmpl.ParameterValues(params)
	if err != nil {
		t.Fatal(err)
	}
	var out []grant
	for _, pol := range resolvedPolicies(t, tmpl, role, values) {
		out = append(out, allowGrants(t, asMap(pol)["PolicyDocument"])...)
	}
	return out
}

// allowGrants lists the action and resource pairs a policy document allows;
// its Resources must be strings.
func allowGrants(t *testing.T, doc any) []grant {
	t.Helper()
	var out []grant
	for _, st := range asSlice(asMap(doc)["Statement"]) {
		s := asMap(st)
		if s["Effect"] != "Allow" {
			continue
		}
		for _, a := range stringsOf(s["Action"]) {
			for _, r := range stringsOf(s["Resource"]) {
				if r == "" {
					t.Errorf("statement %s: a Resource is not a string", js(s))
				}
				out = append(out, grant{a, r})
			}
		}
	}
	return out
}

// resolvedPolicies evaluates a role's Policies as CloudFormation would: each
// Fn::If decided, the list items it makes AWS::NoValue left out, every other
// intrinsic function resolved. Fn::GetAtt, which needs the deployed stack,
// yields "<id>.<attribute>".
func resolvedPolicies(t *testing.T, tmpl samstack.Template, role string, values map[string]string) []any {
	t.Helper()
	r, folded, err := targetResolver(tmpl, values)
	if err != nil {
		t.Fatal(err)
	}
	v, err := decide(r, folded.Resources()[role].Properties["Policies"])
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Value(v)
	if err != nil {
		t.Fatal(err)
	}
	return asSlice(out)
}

// targetResolver returns the template with every Fn::Select and Fn::Split
// (the Target conditions and ARNs are built with them) folded into its
// value, and samstack's resolver for it: the resolver does not evaluate
// those two itself. The Conditions are folded first, then the rest, whose
// Fn::If refer to them.
func targetResolver(tmpl samstack.Template, values map[string]string) (*samstack.Resolver, samstack.Template, error) {
	resolver := func(t samstack.Template) *samstack.Resolver {
		r := samstack.NewResolver(t, values)
		r.Pseudo = staticPseudo
		return r
	}
	conds, err := foldSelectSplit(resolver(tmpl), tmpl["Conditions"])
	if err != nil {
		return nil, nil, err
	}
	withConds := maps.Clone(tmpl)
	withConds["Conditions"] = conds
	v, err := foldSelectSplit(resolver(withConds), map[string]any(withConds))
	if err != nil {
		return nil, nil, err
	}
	folded := samstack.Template(asMap(v))
	return resolver(folded), folded, nil
}

// foldSelectSplit returns a copy of v with each Fn::Select and Fn::Split
// replaced by its value; their arguments may use anything plain resolves.
func foldSelectSplit(plain *samstack.Resolver, v any) (any, error) {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, item := range x {
			var err error
			if out[i], err = foldSelectSplit(plain, item); err != nil {
				return nil, err
			}
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, item := range x {
			var err error
			if out[k], err = foldSelectSplit(plain, item); err != nil {
				return nil, err
			}
		}
		fn, args, _ := samstack.Intrinsic(out)
		a := asSlice(args)
		switch {
		case fn == "Fn::Split" && len(a) == 2:
			s, err := plain.String(a[1])
			if err != nil {
				return nil, fmt.Errorf("Fn::Split: %w", err)
			}
			var parts []any
			for _, p := range strings.Split(s, asString(a[0])) {
				parts = append(parts, p)
			}
			return parts, nil
		case fn == "Fn::Select" && len(a) == 2:
			is, err := plain.String(a[0])
			if err != nil {
				return nil, fmt.Errorf("Fn::Select: %w", err)
			}
			i, err := strconv.Atoi(is)
			list, errL := plain.Value(a[1])
			if err != nil || errL != nil || i < 0 || i >= len(asSlice(list)) {
				// CloudFormation fails the whole stack operation.
				return nil, fmt.Errorf("Fn::Select %s of %s: out of range (%v)", is, js(list), errL)
			}
			return asSlice(list)[i], nil
		}
		return out, nil
	}
	return v, nil
}

// decide returns v with each Fn::If replaced by its branch, the list items
// that become AWS::NoValue left out, and each Fn::GetAtt replaced by
// "<id>.<attribute>".
func decide(r *samstack.Resolver, v any) (any, error) {
	noValue := func(v any) bool { return jsonEqual(v, ref("AWS::NoValue")) }
	fn, args, _ := samstack.Intrinsic(v)
	switch fn {
	case "Fn::If":
		a := asSlice(args)
		if len(a) != 3 {
			return nil, fmt.Errorf("Fn::If %s", js(args))
		}
		b, err := r.Condition(asString(a[0]))
		if err != nil {
			return nil, err
		}
		if b {
			return decide(r, a[1])
		}
		return decide(r, a[2])
	case "Fn::GetAtt":
		a := asSlice(args)
		return fmt.Sprintf("%s.%s", a[0], a[1]), nil
	}
	switch x := v.(type) {
	case []any:
		var out []any
		for _, item := range x {
			y, err := decide(r, item)
			if err != nil {
				return nil, err
			}
			if !noValue(y) {
				out = append(out, y)
			}
		}
		return out, nil
	case map[string]any:
		out := map[string]any{}
		for k, item := range x {
			y, err := decide(r, item)
			if err != nil {
				return nil, err
			}
			if !noValue(y) {
				out[k] = y
			}
		}
		return out, nil
	}
	return v, nil
}

// TestDeployedTargets deploys the template with each kind of Target to
// moto_server: the stack is created, the processor's environment carries the
// Target settings and starts the processor, and the role moto_server built
// (its own evaluation of the template's Fn::Select, Fn::Split and Fn::If)
// grants exactly what TestTargetPolicies expects.
func TestDeployedTargets(t *testing.T) {
	t.Parallel()
	deployed := map[string]bool{
		"none": true, "lambda by name": true, "lambda by ARN with alias": true, "sqs": true,
		"sns": true, "events by name": true, "events by ARN": true, "sqs with KMS key": true, "states": true,
		"durable by name with alias": true, "durable by ARN with version": true,
	}
	eventParams := map[string]string{"TargetEventSource": "com.example.orders", "TargetDetailType": "Order placed"}
	for name := range deployed {
		if !slices.ContainsFunc(targetCases, func(tc targetCase) bool { return tc.name == name }) {
			t.Errorf("no target case %q to deploy", name)
		}
	}
	for _, tc := range targetCases {
		if !deployed[tc.name] {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			params := maps.Clone(tc.params)
			if strings.HasPrefix(params["Target"], "events:") {
				maps.Copy(params, eventParams)
			}
			if strings.HasPrefix(params["Target"], "durable:arn:") {
				params["TargetInvocationType"] = "RequestResponse"
			}
			st := deployShared(t, params) // reads the stack only
			if st.Status != "CREATE_COMPLETE" {
				t.Fatalf("stack status %s", st.Status)
			}
			p := st.Parameters
			proc := st.Functions[processorID]
			for name, param := range map[string]string{
				"TARGET": "Target", "TARGET_EVENT_SOURCE": "TargetEventSource", "TARGET_DETAIL_TYPE": "TargetDetailType",
				"TARGET_INVOCATION_TYPE": "TargetInvocationType",
			} {
				got, ok := proc.Env[name]
				if !ok || got != p[param] {
					t.Errorf("processor %s = %q (set %v), want %s %q", name, got, ok, param, p[param])
				}
			}
			cfg := mototest.Config(t)
			pc, err := processorConfig(envconfig.Map(lambdaEnv(proc)), cfg)
			if err != nil {
				t.Fatalf("processor refuses the deployed environment: %v", err)
			}
			checkTarget(t, pc.Target, p["Target"], p["TargetEventSource"], p["TargetDetailType"])
			if d, ok := pc.Target.(*targets.DurableTarget); ok && d.Synchronous != (p["TargetInvocationType"] == "RequestResponse") {
				t.Errorf("durable target synchronous %v with TargetInvocationType %q", d.Synchronous, p["TargetInvocationType"])
			}

			got := deployedGrants(t, st, processorID)
			account := strings.Split(proc.ARN, ":")[4]
			want := tc.expected(cfg.Region, account)
			var targetGot []grant
			for _, g := range got {
				// The grants every stack has are on the stack's own
				// resources, named after it; TestLeastPrivilege covers
				// them.
				if !strings.Contains(g.Resource, st.Name) {
					targetGot = append(targetGot, g)
				}
			}
			if !sameGrants(targetGot, want) {
				t.Errorf("deployed role of %s grants, besides the stack's own resources,\n%v\nwant\n%v", processorID, targetGot, want)
			}
		})
	}
}

// checkTarget asserts the processor's Target is what spec (a TARGET value;
// "" for none) names, with the bus's source and detail type.
func checkTarget(t *testing.T, got sqsonce.Target, spec, source, detailType string) {
	t.Helper()
	if spec == "" {
		if got != nil {
			t.Errorf("no Target set, the processor delivers to %+v", got)
		}
		return
	}
	s, err := targets.ParseSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	var ok bool
	switch tg := got.(type) {
	case *targets.LambdaTarget:
		ok = s.Kind == targets.Lambda && tg.Function == s.Dest
	case *targets.SQSTarget:
		ok = s.Kind == targets.SQS && tg.QueueURL == s.Dest
	case *targets.SNSTarget:
		ok = s.Kind == targets.SNS && tg.TopicARN == s.Dest
	case *targets.EventsTarget:
		ok = s.Kind == targets.Events && tg.Bus == s.Dest && tg.Source == source && tg.DetailType == detailType
	case *targets.StateMachineTarget:
		ok = s.Kind == targets.States && tg.StateMachineARN == s.Dest
	case *targets.DurableTarget:
		ok = s.Kind == targets.Durable && tg.Qualifier == s.Qualifier() && tg.Function+":"+tg.Qualifier == s.Dest
	}
	if !ok {
		t.Errorf("processor Target %T %+v; want %s (event source %q, detail type %q)", got, got, spec, source, detailType)
	}
}

// deployedGrants reads the Allow grants of a function's role as moto_server
// created it: its own evaluation of the template's Fn::If, Fn::Select and
// Fn::Split.
func deployedGrants(t *testing.T, st *samstack.Stack, fnID string) []grant {
	t.Helper()
	roleName := st.Resources[roleOf(t, st.Template, fnID)].PhysicalID
	ctx := testContext(t, time.Minute)
	client := iam.NewFromConfig(mototest.Config(t))
	names, err := client.ListRolePolicies(ctx, &iam.ListRolePoliciesInput{RoleName: aws.String(roleName)})
	if err != nil {
		t.Fatal(err)
	}
	var got []grant
	for _, name := range names.PolicyNames {
		out, err := client.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(roleName), PolicyName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		raw := aws.ToString(out.PolicyDocument)
		if s, err := url.QueryUnescape(raw); err == nil {
			raw = s
		}
		var doc any
		if err := json.Unmarshal([]byte(raw), &doc); err != nil {
			// moto_server keeps a policy a stack created as the Python
			// repr of the document. These hold no quote or backslash, so
			// the repr becomes JSON this way.
			pyRepr := strings.NewReplacer("'", `"`, "True", "true", "False", "false", "None", "null")
			if err := json.Unmarshal([]byte(pyRepr.Replace(raw)), &doc); err != nil {
				t.Fatalf("policy %s: %v\n%s", name, err, raw)
			}
		}
		got = append(got, allowGrants(t, doc)...)
	}
	return got
}
