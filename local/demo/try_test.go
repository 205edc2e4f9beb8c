package demo

import (
	"bytes"
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
