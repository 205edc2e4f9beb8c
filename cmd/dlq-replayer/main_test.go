package main

import (
	"testing"

	"github.com/sqs-once/sqs-once/internal/lambdamain/lambdamaintest"
)

// runTests runs the package's tests; the integration build starts
// moto_server for them first (metrics_test.go). The start-up check below
// needs no server: it runs main in a fresh process that fails before it
// calls AWS.
var runTests = lambdamaintest.Run

func TestMain(m *testing.M) { lambdamaintest.TestMainWith(m, main, runTests) }

func TestBadConfigurationStopsStartUp(t *testing.T) {
	t.Parallel()
	lambdamaintest.CheckBadConfig(t, []string{"MAX_DELAY=1800"}, "MAIN_QUEUE_URL", "OPERATOR_QUEUE_URL", "MAX_DELAY")
}

// Every execution environment's log opens with the release it runs, even
// when its configuration then stops it.
func TestStartUpLineNamesTheVersion(t *testing.T) {
	t.Parallel()
	lambdamaintest.CheckStartLine(t, nil, "dlq-replayer")
}
