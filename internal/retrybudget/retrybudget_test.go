package retrybudget

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestRetryIsRefusedWhenItCannotFinishBeforeTheDeadline(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	throttled := &types.ProvisionedThroughputExceededException{}
	tests := []struct {
		name      string
		left      time.Duration
		delay     time.Duration
		wantRetry bool
	}{
		{"plenty of time", 5 * time.Second, 400 * time.Millisecond, true},
		{"delay plus one attempt fits exactly", 450 * time.Millisecond, 400 * time.Millisecond, true},
		{"delay fits, the attempt does not", 420 * time.Millisecond, 400 * time.Millisecond, false},
		{"delay alone is too long", 300 * time.Millisecond, 400 * time.Millisecond, false},
		{"deadline passed", -time.Second, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := checkDelay(now, now.Add(tt.left), tt.delay, throttled)
			if tt.wantRetry {
				if err != nil || got != tt.delay {
					t.Fatalf("got %v, %v; want a retry after %v", got, err, tt.delay)
				}
				return
			}
			var nt *NoTimeError
			if !errors.As(err, &nt) || !errors.As(err, new(*types.ProvisionedThroughputExceededException)) {
				t.Fatalf("got %v, %v; want a NoTimeError that still unwraps to the throttle", got, err)
			}
		})
	}
}

func TestWithinLeavesACallWithoutDeadlineAlone(t *testing.T) {
	t.Parallel()
	r := retry.NewStandard()
	if got := Within(context.Background(), r); got != aws.Retryer(r) {
		t.Errorf("Within without a deadline wrapped the retryer: %T", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, ok := Within(ctx, r).(*bounded)
	if !ok {
		t.Fatalf("Within with a deadline gave %T", Within(ctx, r))
	}
	if _, ok := aws.Retryer(b).(aws.RetryerV2); !ok {
		t.Error("the bounded retryer lost the V2 interface the SDK's quota uses")
	}
}

func TestClientCapsTheBackoff(t *testing.T) {
	t.Parallel()
	r := Client(nil)
	for attempt := 1; attempt <= 10; attempt++ {
		d, err := r.RetryDelay(attempt, &types.InternalServerError{})
		if err != nil || d > MaxBackoff {
			t.Fatalf("attempt %d: delay %v, %v; want at most %v", attempt, d, err, MaxBackoff)
		}
	}
}
