package target_test

import (
	"errors"
	"testing"

	"github.com/sqs-once/sqs-once/sqsonce/target"
)

func TestParseSpec(t *testing.T) {
	tests := []struct {
		in        string
		kind      target.Kind
		function  string
		qualifier string
	}{
		{in: "lambda:orders-consumer", kind: target.Lambda, function: "orders-consumer"},
		{in: "lambda:orders-consumer:live", kind: target.Lambda, function: "orders-consumer", qualifier: "live"},
		{in: "lambda:orders-consumer:$LATEST", kind: target.Lambda, function: "orders-consumer", qualifier: "$LATEST"},
		{in: "lambda:123456789012:function:orders", kind: target.Lambda, function: "orders"},
		{in: "lambda:arn:aws:lambda:eu-west-1:123456789012:function:orders:7", kind: target.Lambda, function: "orders", qualifier: "7"},
		{in: "lambda:arn:aws-us-gov:lambda:us-gov-west-1:123456789012:function:orders", kind: target.Lambda, function: "orders"},
		{in: "sqs:https://sqs.us-east-1.amazonaws.com/123456789012/orders", kind: target.SQS},
		{in: "sqs:http://127.0.0.1:5000/123456789012/orders.fifo", kind: target.SQS},
		{in: "sns:arn:aws:sns:us-east-1:123456789012:orders", kind: target.SNS},
		{in: "sns:arn:aws:sns:us-east-1:123456789012:orders.fifo", kind: target.SNS},
		{in: "events:default", kind: target.Events},
		{in: "events:arn:aws:events:us-east-1:123456789012:event-bus/orders", kind: target.Events},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			spec, err := target.ParseSpec(tt.in)
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
	} {
		if spec, err := target.ParseSpec(in); err == nil || !errors.Is(err, target.ErrBadSpec) {
			t.Errorf("ParseSpec(%q) = %+v, %v; want ErrBadSpec", in, spec, err)
		}
	}
}
