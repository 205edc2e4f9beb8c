package retrybudget

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// MaxBackoff caps the SDK's delay between two attempts of one call. The
// SDK's default, 20 s, is longer than most invocations have left; a second
// keeps a throttled call's attempts inside an invocation of a few seconds.
const MaxBackoff = time.Second

// MinAttempt is the least time an attempt is given: a retry whose delay
// leaves less than this before the deadline is not made.
const MinAttempt = 50 * time.Millisecond

// The reserve is the end of a Lambda invocation kept back from its work for
// what must still happen before the deadline (a batch's last calls, the
// response): a tenth of the time the invocation had when its event arrived,
// at least MinReserve and at most MaxReserve. Lambda discards the partial
// batch response of an invocation that times out and redelivers the whole
// batch, so running into the timeout costs more than leaving work for the
// next delivery.
const (
	MinReserve = 500 * time.Millisecond
	MaxReserve = 5 * time.Second
)

// Reserve is the reserve of an invocation that had left when it started.
func Reserve(left time.Duration) time.Duration {
	return min(max(left/10, MinReserve), MaxReserve)
}

// ResponseShare is the part of the reserve kept for the response itself:
// the last calls end this much before the deadline.
func ResponseShare(reserve time.Duration) time.Duration { return reserve / 5 }

// Client is the retryer a client should be built with: the SDK's standard
// retryer with its backoff capped at MaxBackoff.
func Client(r aws.Retryer) aws.Retryer {
	if r == nil {
		r = retry.NewStandard()
	}
	return retry.AddWithMaxBackoffDelay(r, MaxBackoff)
}

// SQS bounds one SQS call's retries by ctx's deadline.
func SQS(ctx context.Context) func(*sqs.Options) {
	return func(o *sqs.Options) { o.Retryer = Within(ctx, o.Retryer) }
}

// Within returns r limited to ctx's deadline; r itself when ctx has none.
func Within(ctx context.Context, r aws.Retryer) aws.Retryer {
	deadline, ok := ctx.Deadline()
	if !ok || r == nil {
		return r
	}
	return &bounded{Retryer: r, deadline: deadline, now: time.Now}
}

// NoTimeError is a retryable failure that was not retried because the
// deadline was too close. It unwraps to the attempt's error.
type NoTimeError struct {
	Err   error
	Delay time.Duration
	Left  time.Duration
}

func (e *NoTimeError) Error() string {
	return fmt.Sprintf("not retried: a retry after %v would not finish in the %v left: %v",
		e.Delay.Round(time.Millisecond), e.Left.Round(time.Millisecond), e.Err)
}

func (e *NoTimeError) Unwrap() error { return e.Err }

type bounded struct {
	aws.Retryer
	deadline time.Time
	now      func() time.Time
}

// GetAttemptToken keeps the SDK's retry quota working for a V2 retryer.
func (b *bounded) GetAttemptToken(ctx context.Context) (func(error) error, error) {
	if v2, ok := b.Retryer.(aws.RetryerV2); ok {
		return v2.GetAttemptToken(ctx)
	}
	return b.Retryer.GetInitialToken(), nil
}

func (b *bounded) RetryDelay(attempt int, err error) (time.Duration, error) {
	delay, derr := b.Retryer.RetryDelay(attempt, err)
	if derr != nil {
		return delay, derr
	}
	return checkDelay(b.now(), b.deadline, delay, err)
}

// checkDelay is the decision, pure so that tests can give it any clock.
func checkDelay(now, deadline time.Time, delay time.Duration, err error) (time.Duration, error) {
	left := deadline.Sub(now)
	if delay+MinAttempt > left {
		return 0, &NoTimeError{Err: err, Delay: delay, Left: left}
	}
	return delay, nil
}
