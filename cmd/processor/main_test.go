package main

import (
	"testing"

	"github.com/sqs-once/sqs-once/internal/lambdamain/lambdamaintest"
)

// runTests runs the package's tests; the integration build starts
// moto_server for them first (metrics_test.go). The start-up checks below
// need no server: they run main in a fresh process that fails before it
// calls AWS.
var runTests = lambdamaintest.Run

func TestMain(m *testing.M) { lambdamaintest.TestMainWith(m, main, runTests) }

func TestBadConfigurationStopsStartUp(t *testing.T) {
	t.Parallel()
	lambdamaintest.CheckBadConfig(t, []string{"IDEMPOTENCY_KEY=body:orderId", "IN_PROGRESS=skip", "TARGET=kafka:orders"},
		"IDEMPOTENCY_TABLE", "KEY_PREFIX", "IDEMPOTENCY_KEY", "IN_PROGRESS", "TARGET")
}

// Every execution environment's log opens with the release it runs, even
// when its configuration then stops it.
func TestStartUpLineNamesTheVersion(t *testing.T) {
	t.Parallel()
	lambdamaintest.CheckStartLine(t, nil, "processor")
}

// A lambda target naming the processor's own function would invoke it for
// ever: start-up refuses it, by name, alias or ARN, naming TARGET.
func TestTargetThatIsItselfStopsStartUp(t *testing.T) {
	t.Parallel()
	for _, target := range []string{"lambda:sqs-once-processor", "lambda:arn:aws:lambda:us-east-1:123456789012:function:sqs-once-processor:live"} {
		lambdamaintest.CheckStartFails(t, []string{
			"IDEMPOTENCY_TABLE=idempotency", "AWS_LAMBDA_FUNCTION_NAME=sqs-once-processor", "AWS_REGION=us-east-1",
			"TARGET=" + target,
		}, "environment variable TARGET: "+target, "the target is the processor's own function")
	}
}
