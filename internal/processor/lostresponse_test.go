package processor_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/processor"
)

// TestLostTableAnswersNeitherLoseNorLockOutNorRepeat: every call of the
// protocol applied by DynamoDB whose answer the SDK never saw, in both
// IN_PROGRESS modes and on FIFO, processes the message exactly once, in the
// invocation that met the fault.
func TestLostTableAnswersNeitherLoseNorLockOutNorRepeat(t *testing.T) {
	t.Parallel()
	calls := []struct {
		name  string
		op    string
		match func([]byte) bool
		fails bool // the business function fails, so the lock is released
	}{
		{"acquire", "UpdateItem", faultproxy.BodyContains(`"ReturnValues":"ALL_OLD"`), false},
		{"complete", "UpdateItem", faultproxy.BodyContains("REMOVE"), false},
		{"release", "UpdateItem", func(b []byte) bool {
			return !bytes.Contains(b, []byte(`"ReturnValues":"ALL_OLD"`)) && bytes.Contains(b, []byte("RELEASED"))
		}, true},
	}
	for _, call := range calls {
		for _, fault := range []faultproxy.Kind{faultproxy.FailAfter, faultproxy.ResetAfter} {
			for _, mode := range []string{processor.InProgressRetry, processor.InProgressDrop} {
				for _, fifoQueue := range []bool{false, true} {
					name := fmt.Sprintf("%s/%s/%s/fifo=%v", call.name, fault, mode, fifoQueue)
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						b := setup(t, func(c *processor.Config) { c.InProgress = mode })
						p := faultyTable(t, b)
						h := b.handler
						p.ScriptWhen(call.op, call.match, fault)

						var opts []func(*events.SQSMessage)
						if fifoQueue {
							opts = append(opts, fifo("g"))
						}
						msg := record("m-1", "x", opts...)
						if call.fails {
							b.business.errs["m-1"] = fmt.Errorf("downstream 503")
						}
						resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg, record("m-2", "y", opts...)}})
						if err != nil || p.Pending() != 0 {
							t.Fatalf("Handle: %v; fault pending: %d", err, p.Pending())
						}
						wantFailed := []string{}
						if call.fails {
							wantFailed = append(wantFailed, "m-1")
							if fifoQueue {
								wantFailed = append(wantFailed, "m-2") // held back behind m-1, in order
							}
						}
						if got := failedIDs(resp); !slices.Equal(got, wantFailed) {
							t.Fatalf("failed %v, want %v", got, wantFailed)
						}
						if call.fails {
							// The lock is gone: the redelivery runs at once.
							delete(b.business.errs, "m-1")
							if failed := b.handle(t, msg); len(failed) != 0 {
								t.Fatalf("redelivery after the lost release failed %v: the message is locked out", failed)
							}
						}
						// A later copy is a duplicate: the business ran once per key.
						if failed := b.handle(t, msg); len(failed) != 0 {
							t.Fatalf("duplicate failed %v", failed)
						}
						runs := 0
						for _, id := range b.business.Calls() {
							if id == "m-1" {
								runs++
							}
						}
						if want := map[bool]int{false: 1, true: 2}[call.fails]; runs != want {
							t.Errorf("business ran m-1 %d times, want %d", runs, want)
						}
					})
				}
			}
		}
	}
}
