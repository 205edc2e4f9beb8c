package sqsmsg

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/retrybudget"
)

// optionSender applies each call's options to a client's Options, as the
// SDK does, and keeps the retryer they leave.
type optionSender struct{ retryers []any }

func (s *optionSender) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	o := sqs.Options{Retryer: retry.NewStandard()}
	for _, fn := range optFns {
		fn(&o)
	}
	s.retryers = append(s.retryers, o.Retryer)
	return acceptAll(in), nil
}

// Every SendMessageBatch fits its retries in the time its context has left
// (retrybudget.SQS): a retry that could not finish before the deadline is
// not made. The processor's forwards, the replayer's sends and the sqs
// target rely on it, with no wrapper of their own.
func TestSendBatchesBoundsEachCallsRetries(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), retrybudget.MinAttempt/2)
	defer cancel()
	api := &optionSender{}
	failed := SendBatches(ctx, api, 1, Batch{QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/q", Entries: []Entry{{RecordID: "1", Body: "x"}}})
	if len(failed) != 0 || len(api.retryers) != 1 {
		t.Fatalf("failed %v, %d calls; want one accepted call", failed, len(api.retryers))
	}
	r, ok := api.retryers[0].(interface {
		RetryDelay(int, error) (time.Duration, error)
	})
	if !ok {
		t.Fatalf("retryer %T", api.retryers[0])
	}
	_, err := r.RetryDelay(1, &sqstypes.KmsThrottled{})
	var noTime *retrybudget.NoTimeError
	if !errors.As(err, &noTime) {
		t.Errorf("a retry with less than an attempt's time left: %v, want a NoTimeError", err)
	}
}
