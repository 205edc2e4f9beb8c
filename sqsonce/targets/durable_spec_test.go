package targets_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// TestDurableSpec: the forms of TARGET=durable:..., each qualified.
func TestDurableSpec(t *testing.T) {
	for _, tt := range []struct{ in, function, qualifier string }{
		{"durable:orders:live", "orders", "live"},
		{"durable:orders:7", "orders", "7"},
		{"durable:123456789012:function:orders:live", "orders", "live"},
		{"durable:arn:aws:lambda:eu-west-1:123456789012:function:orders:12", "orders", "12"},
	} {
		spec, err := targets.ParseSpec(tt.in)
		if err != nil {
			t.Fatalf("ParseSpec(%q): %v", tt.in, err)
		}
		if spec.Kind != targets.Durable || spec.String() != tt.in || spec.FunctionName() != tt.function || spec.Qualifier() != tt.qualifier {
			t.Errorf("ParseSpec(%q) = %+v: function %q qualifier %q, want durable %q %q", tt.in, spec, spec.FunctionName(), spec.Qualifier(), tt.function, tt.qualifier)
		}
	}
}

// TestDurableSpecRefuses: an unqualified durable function, or $LATEST, is
// refused with the fix; malformed ones with the form.
func TestDurableSpecRefuses(t *testing.T) {
	for in, want := range map[string]string{
		"durable:orders":                       "names no version or alias: Lambda invokes a durable function by a qualified ARN; publish a version (or an alias to one) and write durable:orders:<version or alias>",
		"durable:orders:$LATEST":               "$LATEST is refused",
		"durable:123456789012:function:orders": "names no version or alias",
		"durable:arn:aws:lambda:eu-west-1:123456789012:function:orders": "names no version or alias",
		"durable:":            "want lambda:<function>",
		"durable:a b:1":       "want durable:<function name or ARN>:<version or alias> (not $LATEST)",
		"durable:orders:1:2":  "want durable:<function name or ARN>:<version or alias>",
		"durable:orders:l.ve": "want durable:<function name or ARN>:<version or alias>",
	} {
		_, err := targets.ParseSpec(in)
		if !errors.Is(err, targets.ErrBadSpec) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSpec(%q): %v, want ErrBadSpec saying %q", in, err, want)
		}
		tg, err := targets.FromEnv(lookup(map[string]string{"TARGET": in}), aws.Config{}, nil)
		if tg != nil {
			t.Errorf("%q: a target %+v", in, tg)
		}
		checkVarError(t, err, want)
	}
}

// TestDurableFromEnv: TARGET_INVOCATION_TYPE chooses the mode; Event by
// default; another value is refused naming the variable; the processor's
// own function is refused.
func TestDurableFromEnv(t *testing.T) {
	build := func(env map[string]string) *targets.DurableTarget {
		t.Helper()
		tg, err := targets.FromEnv(lookup(env), aws.Config{}, quiet)
		if err != nil {
			t.Fatalf("%v: %v", env, err)
		}
		d, ok := tg.(*targets.DurableTarget)
		if !ok {
			t.Fatalf("%v: %T, want *DurableTarget", env, tg)
		}
		return d
	}
	d := build(map[string]string{"TARGET": "durable:arn:aws:lambda:eu-west-1:123456789012:function:orders:live"})
	if d.Function != "arn:aws:lambda:eu-west-1:123456789012:function:orders" || d.Qualifier != "live" || d.Synchronous || d.Logger != quiet {
		t.Errorf("durable: %+v", d)
	}
	if d := build(map[string]string{"TARGET": "durable:orders:3", "TARGET_INVOCATION_TYPE": "Event"}); d.Synchronous || d.Function != "orders" || d.Qualifier != "3" {
		t.Errorf("Event: %+v", d)
	}
	if d := build(map[string]string{"TARGET": "durable:orders:3", "TARGET_INVOCATION_TYPE": "RequestResponse"}); !d.Synchronous {
		t.Errorf("RequestResponse: %+v, want synchronous", d)
	}
	_, err := targets.FromEnv(lookup(map[string]string{"TARGET": "durable:orders:3", "TARGET_INVOCATION_TYPE": "sync"}), aws.Config{}, nil)
	if err == nil || !strings.Contains(err.Error(), "TARGET_INVOCATION_TYPE") {
		t.Errorf("TARGET_INVOCATION_TYPE=sync: %v, want an error naming it", err)
	}
	_, err = targets.FromEnv(lookup(map[string]string{"TARGET": "durable:sqs-once-processor:1", "AWS_LAMBDA_FUNCTION_NAME": "sqs-once-processor"}), aws.Config{}, nil)
	checkVarError(t, err, "the processor's own function")
}

// TestToDurableFunction: the Go constructor names its arguments.
func TestToDurableFunction(t *testing.T) {
	d, err := targets.ToDurableFunction(aws.Config{}, "123456789012:function:orders", "live")
	if err != nil || d.Function != "123456789012:function:orders" || d.Qualifier != "live" || d.Synchronous {
		t.Fatalf("ToDurableFunction = %+v, %v", d, err)
	}
	for _, tt := range []struct{ function, qualifier, want string }{
		{"orders:live", "live", "ToDurableFunction: function \"orders:live\": want <function name or ARN> without a qualifier"},
		{"orders", "", "ToDurableFunction: qualifier \"\": want a version or an alias"},
		{"orders", "$LATEST", "not $LATEST"},
		{"bad name", "1", "ToDurableFunction: function"},
	} {
		_, err := targets.ToDurableFunction(aws.Config{}, tt.function, tt.qualifier)
		if !errors.Is(err, targets.ErrBadSpec) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ToDurableFunction(%q, %q): %v, want ErrBadSpec saying %q", tt.function, tt.qualifier, err, tt.want)
		}
	}
}
