package sqsonce

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// With QUEUE_URL set, the first event of an execution environment reads
// the queue's settings and logs one warning naming what is unsafe; later
// events do not call again.
func TestUnsafeQueueWarnedOnce(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be)
		queue := b.queues.newQueue(t, false, map[string]string{"VisibilityTimeout": "5"})
		b.cfg.QueueURL = queue
		p := b.newProcessor(t)
		ctx, cancel := context.WithDeadline(context.Background(), b.clock.Now().Add(30*time.Second))
		defer cancel()
		for i := range 2 {
			if _, err := p.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{procRecord(msgIDs("m", 2)[i], "{}")}}); err != nil {
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
		if fake, ok := b.queues.(*fakeQueues); ok && fake.attributeReads != 1 {
			t.Errorf("the queue's attributes were read %d times, want once per execution environment", fake.attributeReads)
		}
	})
}

// A queue set up as the template sets it up raises no warning.
func TestSafeQueueNotWarned(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be)
		dlq := b.queues.newQueue(t, false, nil)
		queue := b.queues.newQueue(t, false, map[string]string{
			"VisibilityTimeout": "180",
			"RedrivePolicy":     `{"deadLetterTargetArn":"` + b.queues.queueARN(t, dlq) + `","maxReceiveCount":"5"}`,
		})
		b.cfg.QueueURL = queue
		p := b.newProcessor(t)
		ctx, cancel := context.WithDeadline(context.Background(), b.clock.Now().Add(30*time.Second))
		defer cancel()
		if _, err := p.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{procRecord("m1", "{}")}}); err != nil {
			t.Fatal(err)
		}
		if logs := b.logs.String(); strings.Contains(logs, "unsafe") {
			t.Errorf("a safe queue was warned about:\n%s", logs)
		}
	})
}
