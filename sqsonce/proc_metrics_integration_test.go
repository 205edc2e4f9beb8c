//go:build integration

package sqsonce

import (
	"testing"

	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
)

// completeWrite is the completion's UpdateItem, as lock_lostresponse_test.go
// tells it apart.
var completeWrite = lockIsComplete

// TestMetricsOfTableFaultsOnTheWire: the table's faults as the SDK meets
// them, through a fault proxy in front of moto_server, counted as
// TestMetricsCountEachFate counts the store's.
func TestMetricsOfTableFaultsOnTheWire(t *testing.T) {
	t.Parallel()
	runMetricsCases(t, []procBackend{dynamoBackend}, []metricsCase{
		{
			name: "COMPLETED write failing every attempt: unrecorded completion",
			prepare: func(t *testing.T, b *procBundle) {
				faults := make([]faultproxy.Fault, 40)
				for i := range faults {
					faults[i] = faultproxy.FailBefore
				}
				faultyTable(t, b).ScriptWhen("UpdateItem", completeWrite, faults...)
			},
			run: func(t *testing.T, b *procBundle) int {
				b.handle(t, procRecord("a", "x"))
				return 1
			},
			want: metricCounts{"UnrecordedCompletion": 1},
		},
		{
			name: "COMPLETED write answered 500 after it applied: recognised, processed",
			prepare: func(t *testing.T, b *procBundle) {
				faultyTable(t, b).ScriptWhen("UpdateItem", completeWrite, faultproxy.FailAfter)
			},
			run: func(t *testing.T, b *procBundle) int {
				b.handle(t, procRecord("a", "x"))
				return 1
			},
			want: metricCounts{"Processed": 1},
		},
	})
}
