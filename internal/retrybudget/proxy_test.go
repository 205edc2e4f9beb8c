//go:build integration

// The fault proxy is a server of the local machinery (internal/local), which
// the hermetic tier does not start: this test runs with -tags integration.

package retrybudget_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/retrybudget"
)

type fixedBackoff time.Duration

func (f fixedBackoff) BackoffDelay(int, error) (time.Duration, error) { return time.Duration(f), nil }

// TestAThrottledCallEndsAtOnceWhenNoRetryFits drives the SDK's real retry
// path: the table throttles, the next attempt would start after the
// deadline, so the call returns the throttle instead of sleeping into it.
func TestAThrottledCallEndsAtOnceWhenNoRetryFits(t *testing.T) {
	t.Parallel()
	// A throttle is answered by the proxy itself, so nothing is behind it.
	p, err := faultproxy.Start("http://127.0.0.1:9")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Script("GetItem", faultproxy.Throttle, faultproxy.Throttle, faultproxy.Throttle)
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(p.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("testing", "testing", ""),
		Retryer:      retry.NewStandard(func(o *retry.StandardOptions) { o.Backoff = fixedBackoff(time.Hour) }),
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"),
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "k"}}}, func(o *dynamodb.Options) { o.Retryer = retrybudget.Within(ctx, o.Retryer) })
	var noTime *retrybudget.NoTimeError
	if !errors.As(err, &noTime) || !errors.As(err, new(*types.ProvisionedThroughputExceededException)) {
		t.Fatalf("error %v, want a NoTimeError wrapping the throttle", err)
	}
	if got := p.Stats().Requests["GetItem"]; got != 1 {
		t.Errorf("%d attempts, want 1: an hour's backoff does not fit in a minute", got)
	}
	if ctx.Err() != nil {
		t.Error("the call waited for its deadline")
	}
}
