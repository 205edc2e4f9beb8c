package targets_test

import (
	"errors"
	"testing"

	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

func TestParseSpec(t *testing.T) {
	tests := []struct {
		in        string
		kind      targets.Kind
		function  string
		qualifier string
	}{
		{in: "lambda:orders-consumer", kind: targets.Lambda, function: "orders-consumer"},
		{in: "lambda:orders-consumer:live", kind: targets.Lambda, function: "orders-consumer", qualifier: "live"},
		{in: "lambda:orders-consumer:$LATEST", kind: targets.Lambda, function: "orders-consumer", qualifier: "$LATEST"},
		{in: "lambda:123456789012:function:orders", kind: targets.Lambda, function: "orders"},
		{in: "lambda:arn:aws:lambda:eu-west-1:123456789012:function:orders:7", kind: targets.Lambda, function: "orders", qualifier: "7"},
		{in: "lambda:arn:aws-us-gov:lambda:us-gov-west-1:123456789012:function:orders", kind: targets.Lambda, function: "orders"},
		{in: "sqs:https://sqs.us-east-1.amazonaws.com/123456789012/orders", kind: targets.SQS},
		{in: "sqs:http://127.0.0.1:5000/123456789012/orders.fifo", kind: targets.SQS},
		{in: "sns:arn:aws:sns:us-east-1:123456789012:orders", kind: targets.SNS},
		{in: "sns:arn:aws:sns:us-east-1:123456789012:orders.fifo", kind: targets.SNS},
		{in: "events:default", kind: targets.Events},
		{in: "events:arn:aws:events:us-east-1:123456789012:event-bus/orders", kind: targets.Events},
		{in: "states:arn:aws:states:us-east-1:123456789012:stateMachine:orders", kind: targets.States},
		{in: "states:arn:aws-cn:states:cn-north-1:123456789012:stateMachine:Orders.v2_(eu)@x", kind: targets.States},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			spec, err := targets.ParseSpec(tt.in)
			if err != nil {
				t.Fatalf("ParseSpec: %v", err)
			}
			if spec.Kind != tt.kind || spec.String() != tt.in {
				t.Errorf("got %+v (%s), want kind %s", spec, spec, tt.kind)
			}
			if spec.FunctionName() != tt.function || spec.Qualifier() != tt.qualifier {
				t.Errorf("function %q qualifier %q, want %q %q", spec.FunctionName(), spec.Qualifier(), tt.function, tt.qualifier)
			}
		})
	}
}

func TestParseSpecRefuses(t *testing.T) {
	for _, in := range []string{
		"", "lambda", "lambda:", "orders", "http://x/1/q", "kafka:orders",
		"lambda:orders consumer", "lambda:a:b:c", "lambda:arn:aws:lambda:eu-west-1:123:function:orders",
		"sqs:orders", "sqs:https://sqs.us-east-1.amazonaws.com/orders", "sqs:https://sqs.us-east-1.amazonaws.com/1/q?x=1", "sqs:ftp://h/1/q",
		"sns:orders", "sns:arn:aws:sqs:us-east-1:123456789012:orders",
		"events:", "events:bad bus", "events:arn:aws:events:us-east-1:123456789012:rule/x",
		" lambda:orders", "Lambda:orders",
		"states:orders", "states:arn:aws:states:us-east-1:123456789012:stateMachine:",
		"states:arn:aws:states:us-east-1:123456789012:stateMachine:orders:live",
		"states:arn:aws:states:us-east-1:123456789012:execution:orders:x",
		"states:arn:aws:states:us-east-1:123456789012:stateMachine:or ders",
		"states:arn:aws:states:us-east-1:123456789012:stateMachine:or*",
	} {
		if spec, err := targets.ParseSpec(in); err == nil || !errors.Is(err, targets.ErrBadSpec) {
			t.Errorf("ParseSpec(%q) = %+v, %v; want ErrBadSpec", in, spec, err)
		}
	}
}
