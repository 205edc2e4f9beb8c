//go:build integration

package sqsonce

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// TestLostTableAnswersNeitherLoseNorLockOutNorRepeat: every call of the
// protocol applied by DynamoDB whose answer the SDK never saw, in both
// IN_PROGRESS modes and on FIFO, processes the message exactly once, in the
// invocation that met the fault.
func TestLostTableAnswersNeitherLoseNorLockOutNorRepeat(t *testing.T) {
	t.Parallel()
	// The UpdateItem of each call, told apart as updateOp does.
	match := map[string]func([]byte) bool{
		"acquire":  faultproxy.BodyContains(`"ReturnValues":"ALL_OLD"`),
		"complete": lockIsComplete,
		"release": func(b []byte) bool {
			return !bytes.Contains(b, []byte(`"ReturnValues":"ALL_OLD"`)) && bytes.Contains(b, []byte(store.StatusReleased))
		},
	}
	for _, c := range lostAnswerCases() {
		for _, fault := range []faultproxy.Kind{faultproxy.FailAfter, faultproxy.ResetAfter} {
			t.Run(fmt.Sprintf("%s/%s", c, fault), func(t *testing.T) {
				t.Parallel()
				b := procSetup(t, dynamoBackend, func(cfg *ConsumerConfig) { cfg.InProgress = c.mode })
				p := faultyTable(t, b)
				p.ScriptWhen("UpdateItem", match[c.op], fault)
				checkLostAnswer(t, b, c, p.Pending)
			})
		}
	}
}
