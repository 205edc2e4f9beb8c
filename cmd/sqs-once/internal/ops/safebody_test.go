package ops

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqs-once/sqs-once/internal/retrybudget/retrybudgettest"
)

// The CLI's configuration carries retrybudget.SafeRequestBody: a redrive or
// a release AWS answered is not sent again by the SDK's retryer.
func TestCLIClientsNeverRepeatAnAnsweredCall(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "testing")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "testing")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
	cfg, err := defaultConfig(context.Background(), "", "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	check := &retrybudgettest.BodyCheck{}
	cfg.HTTPClient = check
	_, _ = sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.RetryMaxAttempts = 1 }).SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: new(string), MessageBody: new(string)})
	sends, writerTos := check.Counts()
	if sends == 0 {
		t.Fatal("no request reached the HTTP client: the test proved nothing")
	}
	if writerTos != 0 {
		t.Errorf("%d of %d requests handed net/http a body with WriteTo: the CLI's configuration lacks retrybudget.SafeRequestBody", writerTos, sends)
	}
}
