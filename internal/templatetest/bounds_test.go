package templatetest

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/samstack"
)

// Values to try for the free-form string parameters, at their edges.
var stringSamples = map[string][]string{
	"IdempotencyKey": {"messageId", "body:/orderId", "body:/order/id", "attribute:orderId"},
	"KeyPrefix":      {"", "orders", strings.Repeat("p", 128)},
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
	conds, err := tmpl.Conditions(values)
	if err != nil {
		return nil, err
	}
	res := tmpl.Resources()
	physical := func(id string) (string, error) {
		switch res[id].Type {
		case "AWS::SQS::Queue":
			return "https://sqs.us-east-1.amazonaws.com/123456789012/stack-" + id, nil
		case "AWS::DynamoDB::Table":
			return "stack-" + id + "-ABC123", nil
		}
		return "", fmt.Errorf("no stand-in for a Ref to %s (%s)", id, res[id].Type)
	}
	pseudo := map[string]string{"AWS::StackName": "stack", "AWS::Region": "us-east-1", "AWS::AccountId": "123456789012", "AWS::Partition": "aws"}
	var eval func(any) (string, error)
	eval = func(v any) (string, error) {
		switch x := v.(type) {
		case string:
			return x, nil
		case float64:
			return num(x), nil
		case bool:
			return strconv.FormatBool(x), nil
		}
		fn, args := function(v)
		switch fn {
		case "Ref":
			name := asString(args)
			if s, ok := values[name]; ok {
				return s, nil
			}
			if s, ok := pseudo[name]; ok {
				return s, nil
			}
			return physical(name)
		case "Fn::If":
			a := asSlice(args)
			if conds[asString(a[0])] {
				return eval(a[1])
			}
			return eval(a[2])
		case "Fn::Sub":
			var err error
			out := regexp.MustCompile(`\$\{([^}]+)\}`).ReplaceAllStringFunc(asString(args), func(m string) string {
				s, e := eval(ref(m[2 : len(m)-1]))
				if e != nil {
					err = e
				}
				return s
			})
			return out, err
		}
		return "", fmt.Errorf("cannot evaluate %s", js(v))
	}
	env := map[string]string{}
	for name, v := range vars {
		s, err := eval(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		env[name] = s
	}
	return env, nil
}
