package main

import (
	"testing"

	"github.com/sqs-once/sqs-once/internal/lambdamain/lambdamaintest"
)

func TestMain(m *testing.M) { lambdamaintest.TestMain(m, main) }

func TestBadConfigurationStopsStartUp(t *testing.T) {
	t.Parallel()
	lambdamaintest.CheckBadConfig(t, []string{"IDEMPOTENCY_KEY=body:orderId", "IN_PROGRESS=skip", "TARGET=kafka:orders"},
		"IDEMPOTENCY_TABLE", "KEY_PREFIX", "IDEMPOTENCY_KEY", "IN_PROGRESS", "TARGET")
}

// A lambda target naming the processor's own function would invoke it for
// ever: start-up refuses it, by name, alias or ARN.
func TestTargetThatIsItselfStopsStartUp(t *testing.T) {
	t.Parallel()
	for _, target := range []string{"lambda:sqs-once-processor", "lambda:arn:aws:lambda:us-east-1:123456789012:function:sqs-once-processor:live"} {
		lambdamaintest.CheckStartFails(t, []string{
			"IDEMPOTENCY_TABLE=idempotency", "AWS_LAMBDA_FUNCTION_NAME=sqs-once-processor", "AWS_REGION=us-east-1",
			"TARGET=" + target,
		}, "Config.Target", "the target is the processor's own function")
	}
}
