package main

import (
	"testing"

	"github.com/sqs-once/sqs-once/internal/lambdamain/lambdamaintest"
)

func TestMain(m *testing.M) { lambdamaintest.TestMain(m, main) }

func TestBadConfigurationStopsStartUp(t *testing.T) {
	t.Parallel()
	lambdamaintest.CheckBadConfig(t, []string{"MAX_DELAY=1800"}, "MAIN_QUEUE_URL", "OPERATOR_QUEUE_URL", "MAX_DELAY")
}
