package processor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/internal/local/mototest"
)

// With QUEUE_URL set, the first event of an execution environment reads
// the queue's settings and logs one warning naming what is unsafe; later
// events do not call again.
func TestUnsafeQueueWarnedOnce(t *testing.T) {
	b := setup(t)
	queue := mototest.NewQueue(t, b.aws, false, map[string]string{"VisibilityTimeout": "5"})
	b.cfg.QueueURL = queue
	h := b.newHandler(t)
	ctx, cancel := context.WithDeadline(context.Background(), b.clock.Now().Add(30*time.Second))
	defer cancel()
	for i := range 2 {
		if _, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{record(ids("m", 2)[i], "{}")}}); err != nil {
			t.Fatal(err)
		}
	}
	logs := b.logs.String()
	if n := strings.Count(logs, "the consumed queue's settings are unsafe"); n != 1 {
		t.Fatalf("%d warnings, want exactly 1:\n%s", n, logs)
	}
	for _, want := range []string{"VisibilityTimeout is 5s, under 6 × the function's timeout (30s)", "no redrive policy"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the warning does not say %q:\n%s", want, logs)
		}
	}
}

// A queue set up as the template sets it up raises no warning.
func TestSafeQueueNotWarned(t *testing.T) {
	b := setup(t)
	dlq := mototest.NewQueue(t, b.aws, false, nil)
	queue := mototest.NewQueue(t, b.aws, false, map[string]string{
		"VisibilityTimeout": "180",
		"RedrivePolicy":     `{"deadLetterTargetArn":"` + mototest.QueueARN(t, b.aws, dlq) + `","maxReceiveCount":"5"}`,
	})
	b.cfg.QueueURL = queue
	h := b.newHandler(t)
	ctx, cancel := context.WithDeadline(context.Background(), b.clock.Now().Add(30*time.Second))
	defer cancel()
	if _, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{record("m1", "{}")}}); err != nil {
		t.Fatal(err)
	}
	if logs := b.logs.String(); strings.Contains(logs, "unsafe") {
		t.Errorf("a safe queue was warned about:\n%s", logs)
	}
}
