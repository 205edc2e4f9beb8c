package ops

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// TestAWSCommandsCarryTheEndpoint: the AWS CLI commands the CLI prints
// (preflight's fixes, status's TTL fix, inspect's execution lookups)
// carry each service's --endpoint-url when its endpoint is not AWS's own,
// after --region, and nothing more on AWS.
func TestAWSCommandsCarryTheEndpoint(t *testing.T) {
	t.Parallel()
	const emulator = "http://127.0.0.1:4566"
	on := endpointsOf(aws.Config{Region: "eu-west-1", BaseEndpoint: aws.String(emulator)})
	for _, service := range []string{"sqs", "lambda", "dynamodb", "stepfunctions"} {
		if on[service] != emulator {
			t.Errorf("endpointsOf with a base endpoint: %s is %q, want %s", service, on[service], emulator)
		}
	}
	if off := endpointsOf(aws.Config{Region: "eu-west-1"}); len(off) != 0 {
		t.Errorf("endpointsOf on AWS: %v, want none", off)
	}
	with := " --region eu-west-1 --endpoint-url " + emulator + " "
	for _, tt := range []struct {
		name    string
		printed func(Endpoints) []string
	}{
		{"preflight's fixes", func(e Endpoints) []string {
			m := &Migration{Region: "eu-west-1", Endpoints: e, ProcessorTimeoutSeconds: 30,
				Queue:         QueueSettings{URL: "https://sqs.eu-west-1.amazonaws.com/123456789012/orders", VisibilitySeconds: 30},
				OtherMappings: []Mapping{{UUID: "u-1", FunctionARN: "arn:aws:lambda:eu-west-1:123456789012:function:other", State: "Enabled"}},
				Store:         &StoreCheck{Store: StoreDynamoDB, Table: "orders-idem", State: TableMissing}}
			var out []string
			for _, c := range m.Checks() {
				out = append(out, c.Change...)
			}
			return out
		}},
		{"status's TTL fix", func(e Endpoints) []string {
			return []string{tableWords(&StoreCheck{Table: "orders-idem", State: TableNoTTL}, awsFlags("dynamodb", "eu-west-1", e))}
		}},
		{"inspect's lookups", func(e Endpoints) []string {
			return []string{executionOf("states:"+testMachine, "k", "eu-west-1", e).Lookup, executionOf("durable:orders:live", "k", "eu-west-1", e).Lookup}
		}},
	} {
		got := tt.printed(on)
		n := 0
		for _, line := range got {
			if i := strings.Index(line, "aws "); i >= 0 {
				n++
				if !strings.Contains(line+" ", with) {
					t.Errorf("%s with an emulator: %q does not carry %q", tt.name, line, with)
				}
			}
		}
		if n == 0 {
			t.Errorf("%s printed no AWS CLI command: %q", tt.name, got)
		}
		for _, line := range tt.printed(nil) {
			if strings.Contains(line, "--endpoint-url") {
				t.Errorf("%s on AWS: %q", tt.name, line)
			}
		}
	}
}
