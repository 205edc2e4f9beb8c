package main

import (
	"testing"

	"github.com/sqs-once/sqs-once/internal/lambdamain/lambdamaintest"
)

func TestMain(m *testing.M) { lambdamaintest.TestMain(m, main) }

func TestBadConfigurationStopsStartUp(t *testing.T) {
	t.Parallel()
	lambdamaintest.CheckBadConfig(t, []string{"IDEMPOTENCY_KEY=body:orderId", "IN_PROGRESS=skip"},
		"IDEMPOTENCY_TABLE", "KEY_PREFIX", "IDEMPOTENCY_KEY", "IN_PROGRESS")
}
