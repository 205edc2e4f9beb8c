package targets_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/sqsoncetest"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// The tests of this file need no AWS: a target's client is built from an
// empty configuration and never called.

// Each constructor refuses a destination that is not of its kind, with the
// error ParseSpec gives the same value in TARGET.
func TestConstructorsRefuseAMalformedDestination(t *testing.T) {
	var cfg aws.Config
	tests := []struct {
		name string
		make func(dest string) (sqsonce.Target, error)
		bad  []string
	}{
		{"ToFunction", func(d string) (sqsonce.Target, error) { return targets.ToFunction(cfg, d) },
			[]string{"", "orders consumer", "orders:live:7", "arn:aws:lambda:eu-west-1:123:function:orders", "https://sqs.us-east-1.amazonaws.com/123456789012/orders"}},
		{"ToQueue", func(d string) (sqsonce.Target, error) { return targets.ToQueue(cfg, d) },
			[]string{"", "orders", "https://sqs.us-east-1.amazonaws.com/orders", "ftp://h/1/q", "arn:aws:sqs:us-east-1:123456789012:orders"}},
		{"ToTopic", func(d string) (sqsonce.Target, error) { return targets.ToTopic(cfg, d) },
			[]string{"", "orders", "arn:aws:sqs:us-east-1:123456789012:orders", "arn:aws:sns:us-east-1:123456789012:"}},
		{"ToBus", func(d string) (sqsonce.Target, error) { return targets.ToBus(cfg, d, "", "") },
			[]string{"", "bad bus", "arn:aws:events:us-east-1:123456789012:rule/x"}},
		{"ToStateMachine", func(d string) (sqsonce.Target, error) { return targets.ToStateMachine(cfg, d) },
			[]string{"", "orders", "arn:aws:states:us-east-1:123456789012:stateMachine:orders:1", "arn:aws:states:us-east-1:123456789012:activity:orders"}},
	}
	for _, tt := range tests {
		for _, dest := range tt.bad {
			tg, err := tt.make(dest)
			if !errors.Is(err, targets.ErrBadSpec) {
				t.Errorf("%s(%q) = %v, %v; want ErrBadSpec", tt.name, dest, tg, err)
			}
		}
	}
}

// A constructor's error names the constructor and the argument as the Go
// caller wrote them, not TARGET, and says the form it wants.
func TestConstructorErrorsNameTheArgument(t *testing.T) {
	var cfg aws.Config
	for _, tt := range []struct {
		err  error
		want string
	}{
		{second(targets.ToFunction(cfg, "orders consumer")), `targets: invalid target: ToFunction: function "orders consumer": want <function name or ARN>[:<alias or version>]`},
		{second(targets.ToQueue(cfg, "orders")), `targets: invalid target: ToQueue: queueURL "orders": want https://sqs.<region>.amazonaws.com/<account>/<queue>`},
		{second(targets.ToTopic(cfg, "orders")), `targets: invalid target: ToTopic: topicARN "orders": want arn:aws:sns:<region>:<account>:<topic>`},
		{second(targets.ToBus(cfg, "bad bus", "", "")), `targets: invalid target: ToBus: bus "bad bus": want <bus name> or arn:aws:events:<region>:<account>:event-bus/<name>`},
		{second(targets.ToStateMachine(cfg, "orders")), `targets: invalid target: ToStateMachine: stateMachineARN "orders": want arn:aws:states:<region>:<account>:stateMachine:<name>`},
	} {
		if tt.err == nil || tt.err.Error() != tt.want {
			t.Errorf("error %v, want %s", tt.err, tt.want)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// Every exported error of the package says where it comes from.
func TestErrorsNameThePackage(t *testing.T) {
	_, parseErr := targets.ParseSpec("kafka:orders")
	for _, err := range []error{targets.ErrBadSpec, targets.ErrFunctionError, targets.ErrUnreadableResponse, targets.ErrItemFailed, targets.ErrGroupBlocked, parseErr} {
		if !strings.HasPrefix(err.Error(), "targets: ") {
			t.Errorf("error %q does not start with the package's name", err)
		}
	}
}

// A constructor's target sends where it was told, as the same TARGET would.
func TestConstructorsBuildTheTarget(t *testing.T) {
	var cfg aws.Config
	fn, err := targets.ToFunction(cfg, "arn:aws:lambda:eu-west-1:123456789012:function:orders:live")
	if err != nil || fn.Function != "arn:aws:lambda:eu-west-1:123456789012:function:orders:live" || fn.API == nil {
		t.Errorf("ToFunction = %+v, %v", fn, err)
	}
	q, err := targets.ToQueue(cfg, "https://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo")
	if err != nil || q.QueueURL != "https://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo" || q.API == nil {
		t.Errorf("ToQueue = %+v, %v", q, err)
	}
	topic, err := targets.ToTopic(cfg, "arn:aws:sns:us-east-1:123456789012:orders")
	if err != nil || topic.TopicARN != "arn:aws:sns:us-east-1:123456789012:orders" || topic.API == nil {
		t.Errorf("ToTopic = %+v, %v", topic, err)
	}
	bus, err := targets.ToBus(cfg, "orders", "com.example.orders", "Order placed")
	if err != nil || bus.Bus != "orders" || bus.Source != "com.example.orders" || bus.DetailType != "Order placed" || bus.API == nil {
		t.Errorf("ToBus = %+v, %v", bus, err)
	}
	sm, err := targets.ToStateMachine(cfg, "arn:aws:states:us-east-1:123456789012:stateMachine:orders")
	if err != nil || sm.StateMachineARN != "arn:aws:states:us-east-1:123456789012:stateMachine:orders" || sm.API == nil {
		t.Errorf("ToStateMachine = %+v, %v", sm, err)
	}
}

func lookup(env map[string]string) envconfig.Lookup { return envconfig.Map(env) }

func TestFromEnvWithoutTarget(t *testing.T) {
	// CloudFormation cannot remove a variable, only blank it: blank is
	// unset.
	for _, env := range []map[string]string{
		{},
		{"TARGET": ""},
		{"TARGET": "  ", "TARGET_EVENT_SOURCE": "com.example", "AWS_LAMBDA_FUNCTION_NAME": "sqs-once-processor"},
	} {
		tg, err := targets.FromEnv(lookup(env), aws.Config{}, nil)
		if tg != nil || err != nil {
			t.Errorf("%v: %v, %v; want nil, nil (the Handler runs)", env, tg, err)
		}
	}
}

func TestFromEnvBuildsEachKind(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	// As in Lambda, which sets the function's own name.
	with := func(kv ...string) map[string]string {
		env := map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "sqs-once-processor"}
		for i := 0; i < len(kv); i += 2 {
			env[kv[i]] = kv[i+1]
		}
		return env
	}
	build := func(env map[string]string) sqsonce.Target {
		t.Helper()
		tg, err := targets.FromEnv(lookup(env), aws.Config{}, logger)
		if err != nil {
			t.Fatalf("%v: %v", env, err)
		}
		return tg
	}
	if fn, ok := build(with("TARGET", "lambda:orders-consumer:live")).(*targets.LambdaTarget); !ok || fn.Function != "orders-consumer:live" || fn.Logger != logger {
		t.Errorf("lambda: %+v", fn)
	}
	if q, ok := build(with("TARGET", "sqs:https://sqs.us-east-1.amazonaws.com/123456789012/orders")).(*targets.SQSTarget); !ok || q.QueueURL != "https://sqs.us-east-1.amazonaws.com/123456789012/orders" {
		t.Errorf("sqs: %+v", q)
	}
	if s, ok := build(with("TARGET", "sns:arn:aws:sns:us-east-1:123456789012:orders.fifo")).(*targets.SNSTarget); !ok || s.TopicARN != "arn:aws:sns:us-east-1:123456789012:orders.fifo" {
		t.Errorf("sns: %+v", s)
	}
	bus, ok := build(with("TARGET", "events:orders", "TARGET_EVENT_SOURCE", "com.example.orders", "TARGET_DETAIL_TYPE", "Order placed")).(*targets.EventsTarget)
	if !ok || bus.Bus != "orders" || bus.Source != "com.example.orders" || bus.DetailType != "Order placed" {
		t.Errorf("events: %+v", bus)
	}
	if sm, ok := build(with("TARGET", "states:arn:aws:states:us-east-1:123456789012:stateMachine:orders")).(*targets.StateMachineTarget); !ok || sm.StateMachineARN != "arn:aws:states:us-east-1:123456789012:stateMachine:orders" {
		t.Errorf("states: %+v", sm)
	}
	// Blank: the entry's defaults, which the target fills in per entry.
	if bus, ok := build(with("TARGET", "events:default", "TARGET_EVENT_SOURCE", "", "TARGET_DETAIL_TYPE", "")).(*targets.EventsTarget); !ok || bus.Source != "" || bus.DetailType != "" {
		t.Errorf("events with blank source and detail type: %+v", bus)
	}
}

// checkVarError asserts err names the variable TARGET, and says want.
func checkVarError(t *testing.T, err error, want string) {
	t.Helper()
	var ve *envconfig.VarError
	if !errors.As(err, &ve) || ve.Name != "TARGET" {
		t.Errorf("error %v, want one naming environment variable TARGET", err)
		return
	}
	if !strings.Contains(err.Error(), "environment variable TARGET: ") || !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

func TestFromEnvRefusesABadTarget(t *testing.T) {
	for _, v := range []string{"kafka:orders", "lambda", "lambda:orders consumer", "sqs:orders", "Lambda:orders"} {
		tg, err := targets.FromEnv(lookup(map[string]string{"TARGET": v}), aws.Config{}, nil)
		if tg != nil {
			t.Errorf("%q: a target %+v", v, tg)
		}
		checkVarError(t, err, "invalid target")
	}
}

// The error of a bad TARGET speaks to whoever set the variable: the
// variable and its value, not the Go package or a constructor.
func TestFromEnvErrorNamesTheVariable(t *testing.T) {
	_, err := targets.FromEnv(lookup(map[string]string{"TARGET": "sqs:orders"}), aws.Config{}, nil)
	want := `environment variable TARGET: invalid target "sqs:orders": want sqs:https://sqs.<region>.amazonaws.com/<account>/<queue>`
	if err == nil || err.Error() != want {
		t.Errorf("FromEnv: %v, want %s", err, want)
	}
	_, err = targets.FromEnv(lookup(map[string]string{"TARGET": "states:orders"}), aws.Config{}, nil)
	want = `environment variable TARGET: invalid target "states:orders": want states:arn:aws:states:<region>:<account>:stateMachine:<name>`
	if err == nil || err.Error() != want {
		t.Errorf("FromEnv: %v, want %s", err, want)
	}
}

// A lambda target naming the processor's own function would invoke it for
// ever, each invocation delivering the batch to itself again: refused, by
// name, alias, version, partial and full ARN.
func TestFromEnvRefusesTheProcessorsOwnFunction(t *testing.T) {
	for _, v := range []string{
		"lambda:sqs-once-processor",
		"lambda:sqs-once-processor:live",
		"lambda:sqs-once-processor:$LATEST",
		"lambda:123456789012:function:sqs-once-processor:7",
		"lambda:arn:aws:lambda:us-east-1:123456789012:function:sqs-once-processor",
		"lambda:arn:aws:lambda:us-east-1:123456789012:function:sqs-once-processor:live",
	} {
		tg, err := targets.FromEnv(lookup(map[string]string{"TARGET": v, "AWS_LAMBDA_FUNCTION_NAME": "sqs-once-processor"}), aws.Config{}, nil)
		if tg != nil {
			t.Errorf("%q: a target %+v", v, tg)
		}
		checkVarError(t, err, "the target is the processor's own function")
	}
	// Another function, or one whose name only starts the same, is fine;
	// so is any name when the function's own is unknown (outside Lambda).
	for _, env := range []map[string]string{
		{"TARGET": "lambda:orders-consumer", "AWS_LAMBDA_FUNCTION_NAME": "sqs-once-processor"},
		{"TARGET": "lambda:sqs-once-processor-v2", "AWS_LAMBDA_FUNCTION_NAME": "sqs-once-processor"},
		{"TARGET": "lambda:sqs-once-processor"},
	} {
		if _, err := targets.FromEnv(lookup(env), aws.Config{}, nil); err != nil {
			t.Errorf("%v: %v", env, err)
		}
	}
}

func TestSQSTargetCheckSource(t *testing.T) {
	tg, err := targets.ToQueue(aws.Config{}, "https://sqs.us-east-1.amazonaws.com/123456789012/orders")
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.CheckSource("arn:aws:sqs:us-east-1:123456789012:orders"); err == nil {
		t.Error("the queue the target sends to is accepted as the source")
	}
	for _, arn := range []string{
		"arn:aws:sqs:us-east-1:123456789012:orders-in",
		"arn:aws:sqs:eu-west-1:123456789012:orders",
		"arn:aws:sqs:us-east-1:111122223333:orders",
	} {
		if err := tg.CheckSource(arn); err != nil {
			t.Errorf("%s: %v", arn, err)
		}
	}
}

// The processor asks an sqs target about each event's source: records of
// the queue it sends to are refused as a whole, before any is locked or
// sent, since each would come back for ever.
func TestProcessorRefusesToSendAQueueToItself(t *testing.T) {
	tg, err := targets.ToQueue(aws.Config{}, "https://sqs.us-east-1.amazonaws.com/123456789012/orders")
	if err != nil {
		t.Fatal(err)
	}
	store := sqsoncetest.NewStore()
	p, err := sqsonce.NewConsumer(sqsonce.ConsumerConfig{Config: sqsonce.Config{Store: store, KeyPrefix: "app", Test: sqsonce.TestConfig{Now: store.Now}}, Target: tg}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m1", Body: "x", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders"},
	}})
	if !errors.Is(err, sqsonce.ErrQueueLoop) || !strings.Contains(fmt.Sprint(err), "ConsumerConfig.Target") {
		t.Errorf("Handle: %v, want ErrQueueLoop naming ConsumerConfig.Target", err)
	}
	if n := len(store.Records()); n != 0 {
		t.Errorf("%d records written, want none", n)
	}
}

func TestDetail(t *testing.T) {
	tests := []struct{ body, want string }{
		{`{"a":1}`, `{"a":1,"sqsOnce":{"key":"k","fence":7}}`},
		{`{}`, `{"sqsOnce":{"key":"k","fence":7}}`},
		{` { } `, `{"sqsOnce":{"key":"k","fence":7}}`},
		{`{"sqsOnce":"mine"}`, `{"body":"{\"sqsOnce\":\"mine\"}","sqsOnce":{"key":"k","fence":7}}`},
		{`[1,2]`, `{"body":"[1,2]","sqsOnce":{"key":"k","fence":7}}`},
		{`{"a":`, `{"body":"{\"a\":","sqsOnce":{"key":"k","fence":7}}`},
		{`hello`, `{"body":"hello","sqsOnce":{"key":"k","fence":7}}`},
	}
	for _, tt := range tests {
		got := targets.Detail(sqsonce.Delivery{Record: events.SQSMessage{Body: tt.body}, Key: "k", Fence: 7})
		if !json.Valid([]byte(got)) {
			t.Errorf("Detail(%q) = %s is not JSON", tt.body, got)
		}
		var g, w any
		_ = json.Unmarshal([]byte(got), &g)
		_ = json.Unmarshal([]byte(tt.want), &w)
		if fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("Detail(%q) = %s, want %s", tt.body, got, tt.want)
		}
	}
}
