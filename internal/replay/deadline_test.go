package replay

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqs-once/sqs-once/internal/retrybudget"
)

// deadlineRecorder records the deadline each send is given.
type deadlineRecorder struct {
	mu        sync.Mutex
	deadlines []time.Time
}

func (d *deadlineRecorder) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	deadline, _ := ctx.Deadline()
	d.deadlines = append(d.deadlines, deadline)
	return &sqs.SendMessageBatchOutput{}, nil
}

// TestSendsEndBeforeTheResponseShare: a send still running at the timeout
// would cost the invocation's whole response, and Lambda would send every
// record of the batch again.
func TestSendsEndBeforeTheResponseShare(t *testing.T) {
	t.Parallel()
	rec := &deadlineRecorder{}
	h := New(Config{MainQueueURL: "https://sqs.us-east-1.amazonaws.com/1/main", OperatorQueueURL: "https://sqs.us-east-1.amazonaws.com/1/op", MaxAttempts: 3}, Deps{SQS: rec})
	deadline := time.Now().Add(30 * time.Second)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m", Body: "b"}}})
	// 30 s left: a 3 s reserve, of which a fifth is the response's.
	want := deadline.Add(-retrybudget.ResponseShare(retrybudget.Reserve(30 * time.Second)))
	if len(rec.deadlines) != 1 || rec.deadlines[0].Sub(want).Abs() > 100*time.Millisecond {
		t.Errorf("send deadlines %v, want one about %v (600 ms before the invocation's)", rec.deadlines, want)
	}
}
