//go:build integration

package templatetest

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/samstack"
	"github.com/sqs-once/sqs-once/internal/envconfig"
)

// Values to try for the free-form string parameters, at their edges.
var stringSamples = map[string][]string{
	"IdempotencyKey": {"messageId", "body:/orderId", "body:/order/id", "attribute:orderId"},
	"KeyPrefix":      {"", "orders", strings.Repeat("p", 128), "!\"$%&'()*+,-./:;<=>?@[\\]^_`{|}~"},
	"Target": {
		"", "lambda:consumer", "lambda:" + strings.Repeat("f", 64) + ":$LATEST",
		"lambda:arn:aws:lambda:eu-west-1:111122223333:function:consumer:live",
		"sqs:https://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo",
		"sns:arn:aws:sns:us-east-1:123456789012:orders", "events:default",
		"events:arn:aws:events:us-east-1:123456789012:event-bus/orders",
		"states:arn:aws:states:us-east-1:123456789012:stateMachine:" + strings.Repeat("s", 80),
	},
	"ExistingQueueArn": {"", "arn:aws:sqs:us-east-1:123456789012:orders", "arn:aws:sqs:eu-west-1:111122223333:orders.fifo",
		"arn:aws-cn:sqs:cn-north-1:111122223333:" + strings.Repeat("q", 80), "arn:aws:sqs:us-east-1:123456789012:" + strings.Repeat("q", 75) + ".fifo"},
	"TargetEventSource": {"", "sqs-once", strings.Repeat("s", 256), "!~"},
	"TargetDetailType":  {"", "sqs-once message", strings.Repeat("d", 128), " ~"},
}

// TestEveryAcceptedParameterValueStartsTheBinaries deploys nothing: it
// computes the environment the template gives each function for values at
// the edges of every parameter's constraints and checks the binary's own
// configuration reader accepts it. A template range wider than the binary's
// would pass CloudFormation and fail every invocation.
func TestEveryAcceptedParameterValueStartsTheBinaries(t *testing.T) {
	t.Parallel()
	tmpl := translatedTemplate(t)
	res := tmpl.Resources()
	for _, p := range tmpl.Parameters() {
		var samples []string
		switch {
		case len(p.AllowedValues) > 0:
			samples = p.AllowedValues
		case p.Type == "Number":
			samples = []string{num(*p.MinValue), num(*p.MaxValue)}
		default:
			samples = stringSamples[p.Name]
		}
		for fnID, load := range loaders {
			vars := asMap(asMap(res[fnID].Properties["Environment"])["Variables"])
			if !refersTo(vars, p.Name) {
				continue
			}
			if len(samples) == 0 {
				t.Errorf("%s reaches %s's environment but this test has no sample values for it", p.Name, fnID)
			}
			for _, v := range samples {
				values, err := tmpl.ParameterValues(map[string]string{p.Name: v})
				if err != nil {
					t.Errorf("%s=%q: rejected by the template itself: %v", p.Name, v, err)
					continue
				}
				env, err := environment(tmpl, vars, values)
				if err != nil {
					t.Fatalf("%s: %v", fnID, err)
				}
				env["AWS_LAMBDA_FUNCTION_NAME"] = "sqs-once-" + fnID
				if err := load(envconfig.Map(env)); err != nil {
					t.Errorf("%s=%q: %s refuses to start: %v", p.Name, v, fnID, err)
				}
			}
		}
	}
}

func refersTo(vars map[string]any, name string) bool {
	for _, v := range vars {
		for _, r := range references(v) {
			if r == name {
				return true
			}
		}
	}
	return false
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// environment evaluates a function's environment variables as CloudFormation
// would for the given parameter values, with made-up physical names for the
// stack's resources.
func environment(tmpl samstack.Template, vars map[string]any, values map[string]string) (map[string]string, error) {
	res := tmpl.Resources()
	r := samstack.NewResolver(tmpl, values)
	r.Pseudo = staticPseudo
	r.Resource = func(id string) (string, bool) {
		switch res[id].Type {
		case "AWS::SQS::Queue":
			return "https://sqs.us-east-1.amazonaws.com/123456789012/stack-" + id, true
		case "AWS::DynamoDB::Table":
			return "stack-" + id + "-ABC123", true
		}
		return "", false
	}
	env := map[string]string{}
	for name, v := range vars {
		s, err := r.String(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		env[name] = s
	}
	return env, nil
}

// TestStringPatternsRefuseWhatTheBinaryRefuses: the free-form parameters'
// patterns turn away at deploy time what the processor would refuse at every
// start, and accept its whole valid range.
func TestStringPatternsRefuseWhatTheBinaryRefuses(t *testing.T) {
	t.Parallel()
	tmpl := translatedTemplate(t)
	params := map[string]samstack.Parameter{}
	for _, p := range tmpl.Parameters() {
		params[p.Name] = p
	}
	tests := []struct {
		param, value string
		ok           bool
	}{
		{"IdempotencyKey", "messageId", true},
		{"IdempotencyKey", "body:/orderId", true},
		{"IdempotencyKey", "body:/", true}, // the member named "" (RFC 6901)
		{"IdempotencyKey", "body:/a~1b/~0c", true},
		{"IdempotencyKey", "attribute:order id", true},
		{"IdempotencyKey", "body:", false},
		{"IdempotencyKey", "body:orderId", false},
		{"IdempotencyKey", "body:/a~2", false},
		{"IdempotencyKey", "body:/a~", false},
		{"IdempotencyKey", "body:/~~01", false},
		{"IdempotencyKey", "attribute:", false},
		{"IdempotencyKey", "messageid", false},
		{"KeyPrefix", "", true},
		{"KeyPrefix", "orders-v2_!$%&'()*+,./:;<=>?@[]^`{|}~\\\"", true},
		{"KeyPrefix", strings.Repeat("p", 128), true},
		{"KeyPrefix", strings.Repeat("p", 129), false},
		{"KeyPrefix", "a#b", false},
		{"KeyPrefix", "a b", false},
		{"KeyPrefix", "a\tb", false},
		{"KeyPrefix", "commandé", false}, // not ASCII: 128 characters could exceed 128 bytes
		{"KeyPrefix", "\u00a0", false},
		{"TargetEventSource", "com.example.orders", true},
		{"TargetEventSource", "", true}, // the processor's default
		{"TargetEventSource", strings.Repeat("s", 256), true},
		{"TargetEventSource", strings.Repeat("s", 257), false},
		{"TargetEventSource", "com.example orders", false},
		{"TargetDetailType", "Order placed", true},
		{"TargetDetailType", strings.Repeat("d", 128), true},
		{"TargetDetailType", strings.Repeat("d", 129), false},
		{"TargetDetailType", "commandé", false},
		{"TargetKmsKeyArn", "", true},
		{"TargetKmsKeyArn", kmsKey, true},
		{"TargetKmsKeyArn", "arn:aws:kms:eu-west-1:111122223333:key/mrk-1234abcd12ab34cd56ef1234567890ab", true},
		{"TargetKmsKeyArn", "arn:aws:kms:eu-west-1:111122223333:alias/orders", false},
		{"TargetKmsKeyArn", "1234abcd-12ab-34cd-56ef-1234567890ab", false},
	}
	for _, tt := range tests {
		p, ok := params[tt.param]
		if !ok {
			t.Fatalf("no parameter %s", tt.param)
		}
		err := p.Check(tt.value)
		if (err == nil) != tt.ok {
			t.Errorf("%s=%q: accepted %v, want %v (%v)", tt.param, tt.value, err == nil, tt.ok, err)
		}
		if !tt.ok {
			continue
		}
		env := map[string]string{"IDEMPOTENCY_TABLE": "t", "AWS_LAMBDA_FUNCTION_NAME": "fn"}
		envVar, ok := map[string]string{
			"IdempotencyKey": "IDEMPOTENCY_KEY", "KeyPrefix": "KEY_PREFIX",
			"TargetEventSource": "TARGET_EVENT_SOURCE", "TargetDetailType": "TARGET_DETAIL_TYPE",
		}[tt.param]
		if !ok {
			continue // not an environment variable (TargetKmsKeyArn is a policy's)
		}
		env[envVar] = tt.value
		if err := loaders[processorID](envconfig.Map(env)); err != nil {
			t.Errorf("%s=%q: the template accepts it, the processor refuses it: %v", tt.param, tt.value, err)
		}
	}
}

// narrowerThanTheBinary lists the Number parameters whose range is, on
// purpose, a part of what their variable accepts; the docs' configuration
// reference gives both ranges. Every other parameter that feeds a variable
// has exactly the binary's range, so each limit has one source: the code.
var narrowerThanTheBinary = map[string]string{
	"MaxAttempts": "MAX_ATTEMPTS takes up to 1000; a stack replays a dead letter at most 100 times",
	"BackoffRate": "BACKOFF_RATE takes up to 1000; at 10 the default ceiling already reaches MaxDelay by the third replay",
	"MessageRetentionPeriod": "a queue's retention, 1 hour to 12 days so that the DLQ's 14 days outlast it; " +
		"it is MAX_MESSAGE_AGE (0 to 1209600) only while MaxMessageAge is 0",
}

// TestNumberParameterLimitsAreTheBinarysLimits: a value one past either end
// of a Number parameter's range is one the function refuses, so the
// template's MinValue and MaxValue state the code's limits rather than a
// copy of them that can drift (DedupeWindow's maximum once said 365 days
// where the processor takes 366).
func TestNumberParameterLimitsAreTheBinarysLimits(t *testing.T) {
	t.Parallel()
	tmpl := translatedTemplate(t)
	res := tmpl.Resources()
	defaults, err := tmpl.ParameterValues(nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range tmpl.Parameters() {
		if p.Type != "Number" || p.MinValue == nil || p.MaxValue == nil {
			continue
		}
		for fnID, load := range loaders {
			vars := asMap(asMap(res[fnID].Properties["Environment"])["Variables"])
			if !refersTo(vars, p.Name) {
				continue
			}
			seen[p.Name] = true
			starts := func(v float64) bool {
				values := maps.Clone(defaults)
				values[p.Name] = num(v)
				env, err := environment(tmpl, vars, values)
				if err != nil {
					t.Fatalf("%s: %v", fnID, err)
				}
				env["AWS_LAMBDA_FUNCTION_NAME"] = "sqs-once-" + fnID
				return load(envconfig.Map(env)) == nil
			}
			below, above := starts(*p.MinValue-1), starts(*p.MaxValue+1)
			if _, narrower := narrowerThanTheBinary[p.Name]; narrower {
				if !below && !above {
					t.Errorf("%s: MinValue %s and MaxValue %s are now %s's limits: remove it from narrowerThanTheBinary", p.Name, num(*p.MinValue), num(*p.MaxValue), fnID)
				}
				continue
			}
			if below {
				t.Errorf("%s: %s starts with %s, below MinValue %s: lower MinValue to the binary's limit, or list it in narrowerThanTheBinary with the reason (and say so in docs/configuration.md)", p.Name, fnID, num(*p.MinValue-1), num(*p.MinValue))
			}
			if above {
				t.Errorf("%s: %s starts with %s, above MaxValue %s: raise MaxValue to the binary's limit, or list it in narrowerThanTheBinary with the reason (and say so in docs/configuration.md)", p.Name, fnID, num(*p.MaxValue+1), num(*p.MaxValue))
			}
		}
	}
	for name := range narrowerThanTheBinary {
		if !seen[name] {
			t.Errorf("narrowerThanTheBinary names %s, which feeds no function's variable", name)
		}
	}
}
