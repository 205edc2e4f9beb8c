package sqsonce_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"

	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/sqsonce"
)

// bundle is a table of its own, and the AWS configuration through a proxy
// that counts the calls.
type bundle struct {
	cfg   sqsonce.Config
	proxy *faultproxy.Proxy
}

func setup(t testing.TB) bundle {
	t.Helper()
	awsCfg := mototest.Config(t)
	table := mototest.NewIdempotencyTable(t, awsCfg)
	p, err := faultproxy.Start(mototest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	awsCfg.BaseEndpoint = aws.String(p.URL)
	awsCfg.Retryer = func() aws.Retryer { return retry.AddWithMaxBackoffDelay(retry.NewStandard(), 5*time.Millisecond) }
	return bundle{
		cfg:   sqsonce.Config{Table: table, KeyPrefix: "test", AWS: awsCfg, Logger: slog.New(slog.DiscardHandler)},
		proxy: p,
	}
}

// calls is the DynamoDB calls made so far.
func (b bundle) calls() int {
	s := b.proxy.Stats()
	return s.Requests["UpdateItem"] + s.Requests["DeleteItem"] + s.Requests["PutItem"] + s.Requests["GetItem"] // every kind, in case one appears
}

func TestDoReportsWhatHappenedToTheFunction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, err := sqsonce.New(b.cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	boom := errors.New("boom")

	if err := p.Do(ctx, "k", func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("failing fn: %v, want its error", err)
	}
	var key string
	var fence int64
	if err := p.Do(ctx, "k", func(ctx context.Context) error { key, fence = sqsonce.Key(ctx), sqsonce.Fence(ctx); return nil }); err != nil {
		t.Fatalf("retry after a failure: %v, want nil: the lock was released", err)
	}
	if key != "k" || fence <= 0 {
		t.Errorf("fn saw key %q fence %d, want k and a positive fence", key, fence)
	}
	if err := p.Do(ctx, "k", func(context.Context) error { t.Error("ran twice"); return nil }); !errors.Is(err, sqsonce.ErrDuplicate) {
		t.Errorf("after success: %v, want ErrDuplicate", err)
	}

	// Another holder's live lock.
	other, _ := sqsonce.New(b.cfg, nil)
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		done <- other.Do(ctx, "busy", func(context.Context) error { close(inside); <-release; return nil })
	}()
	<-inside
	if err := p.Do(ctx, "busy", func(context.Context) error { t.Error("ran under another's lock"); return nil }); !errors.Is(err, sqsonce.ErrInProgress) {
		t.Errorf("under another holder's lock: %v, want ErrInProgress", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", strings.Repeat("k", 1025)} {
		if err := p.Do(ctx, bad, func(context.Context) error { t.Error("ran"); return nil }); !errors.Is(err, sqsonce.ErrNoKey) {
			t.Errorf("key of %d bytes: %v, want ErrNoKey", len(bad), err)
		}
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	t.Parallel()
	aws := setup(t).cfg.AWS
	tests := []struct {
		field string
		cfg   sqsonce.Config
	}{
		{"Table", sqsonce.Config{KeyPrefix: "p", AWS: aws}},
		{"KeyPrefix", sqsonce.Config{Table: "t", AWS: aws}},
		{"KeyPrefix", sqsonce.Config{Table: "t", KeyPrefix: "a b", AWS: aws}},
		{"Key", sqsonce.Config{Table: "t", KeyPrefix: "p", Key: "header:x", AWS: aws}},
		{"Key", sqsonce.Config{Table: "t", KeyPrefix: "p", Key: "messageId", KeyFunc: func(events.SQSMessage) (string, error) { return "", nil }, AWS: aws}},
		{"MaxConcurrency", sqsonce.Config{Table: "t", KeyPrefix: "p", MaxConcurrency: -1, AWS: aws}},
		{"LocalCache", sqsonce.Config{Table: "t", KeyPrefix: "p", LocalCache: -1, AWS: aws}},
		{"InProgress", sqsonce.Config{Table: "t", KeyPrefix: "p", InProgress: "later", AWS: aws}},
		{"AWS", sqsonce.Config{Table: "t", KeyPrefix: "p"}},
	}
	for _, tt := range tests {
		_, err := sqsonce.New(tt.cfg, nil)
		if err == nil || !strings.Contains(err.Error(), "Config."+tt.field+":") {
			t.Errorf("%s: error %v, want one naming Config.%s", tt.field, err, tt.field)
		}
	}
}

func TestAProcessorWithoutHandlerRefusesEvents(t *testing.T) {
	t.Parallel()
	p, err := sqsonce.New(setup(t).cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m"}}}); !errors.Is(err, sqsonce.ErrNoHandler) {
		t.Errorf("Handle without a handler: %v, want ErrNoHandler (an invocation error, so nothing is deleted)", err)
	}
}

func TestKeyFuncAndLocalCacheCostNoCallForARepeatedDuplicate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.KeyFunc = func(m events.SQSMessage) (string, error) {
		return m.MessageAttributes["tenant"].DataType + "/" + m.Body, nil
	}
	b.cfg.LocalCache = 100
	runs := 0
	p, err := sqsonce.New(b.cfg, func(context.Context, events.SQSMessage) error { runs++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	msg := events.SQSMessage{MessageId: "m", Body: "order-1", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:q"}
	want := []int{2, 0, 0} // new, then duplicates answered by the cache
	for i, w := range want {
		before := b.calls()
		resp, err := p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg}})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("delivery %d: %v %v", i, resp, err)
		}
		if got := b.calls() - before; got != w {
			t.Errorf("delivery %d: %d DynamoDB calls, want %d", i, got, w)
		}
	}
	if runs != 1 {
		t.Errorf("handler ran %d times, want 1", runs)
	}
}

func TestTheSameKeyWithAnotherBodyGoesToTheOperatorQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.ValidatePayload = true
	b.cfg.Key = "body:/orderId"
	b.cfg.OperatorQueueURL = mototest.NewQueue(t, mototest.Config(t), false, nil)
	p, err := sqsonce.New(b.cfg, func(context.Context, events.SQSMessage) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	arn := "arn:aws:sqs:us-east-1:123456789012:orders"
	for _, m := range []events.SQSMessage{
		{MessageId: "m-1", Body: `{"orderId":"A","amount":10}`, EventSourceARN: arn},
		{MessageId: "m-2", Body: `{"orderId":"A","amount":10}`, EventSourceARN: arn},    // a duplicate
		{MessageId: "m-3", Body: `{"orderId":"A","amount":99999}`, EventSourceARN: arn}, // a conflict
	} {
		resp, err := p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{m}})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("%s: %v %v, want it done (processed, duplicate or forwarded)", m.MessageId, resp, err)
		}
	}
	got := mototest.Receive(t, mototest.Config(t), b.cfg.OperatorQueueURL, 1, 5*time.Second)
	if len(got) != 1 || aws.ToString(got[0].Body) != `{"orderId":"A","amount":99999}` ||
		aws.ToString(got[0].MessageAttributes["sqs-once-reason"].StringValue) != "payload-mismatch" {
		t.Fatalf("operator queue holds %d messages (%v), want the conflicting one with reason payload-mismatch", len(got), got)
	}
}

func TestConfigFromEnvReadsTheDeployedFunctionsVariables(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"IDEMPOTENCY_TABLE": "orders-idem", "AWS_LAMBDA_FUNCTION_NAME": "orders-fn", "IDEMPOTENCY_KEY": "body:/orderId",
		"LOCK_TIMEOUT": "9", "DEDUPE_WINDOW": "3600", "IN_PROGRESS": "drop", "MAX_CONCURRENCY": "3",
		"PAYLOAD_VALIDATION": "on", "LOCAL_CACHE": "50",
	}
	cfg, err := sqsonce.ConfigFromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	want := sqsonce.Config{Table: "orders-idem", KeyPrefix: "orders-fn", Key: "body:/orderId", LockTimeout: 9 * time.Second,
		DedupeWindow: time.Hour, InProgress: sqsonce.InProgressDrop, MaxConcurrency: 3, ValidatePayload: true, LocalCache: 50}
	if cfg.Table != want.Table || cfg.KeyPrefix != want.KeyPrefix || cfg.Key != want.Key || cfg.LockTimeout != want.LockTimeout ||
		cfg.DedupeWindow != want.DedupeWindow || cfg.InProgress != want.InProgress || cfg.MaxConcurrency != want.MaxConcurrency ||
		cfg.ValidatePayload != want.ValidatePayload || cfg.LocalCache != want.LocalCache {
		t.Errorf("ConfigFromEnv = %+v, want %+v", cfg, want)
	}
	env["MAX_CONCURRENCY"], env["LOCAL_CACHE"] = "0", "-1"
	if _, err := sqsonce.ConfigFromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err == nil ||
		!strings.Contains(err.Error(), "MAX_CONCURRENCY") || !strings.Contains(err.Error(), "LOCAL_CACHE") {
		t.Errorf("bad variables: %v, want both named", err)
	}
}

func TestTargetAndHandlerTogetherRefused(t *testing.T) {
	cfg := sqsonce.Config{Table: "idempotency", KeyPrefix: "p", Target: "sqs:https://sqs.us-east-1.amazonaws.com/123456789012/q", AWS: mototest.Config(t)}
	_, err := sqsonce.New(cfg, func(context.Context, events.SQSMessage) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "Config.Target") {
		t.Fatalf("New: %v, want an error naming Config.Target", err)
	}
	cfg.Target = "sqs:orders"
	if _, err := sqsonce.New(cfg, nil); err == nil || !strings.Contains(err.Error(), "Config.Target") {
		t.Fatalf("New with a bad target: %v, want an error naming Config.Target", err)
	}
}

func TestConfigFromEnvReadsTheTarget(t *testing.T) {
	env := map[string]string{"IDEMPOTENCY_TABLE": "t", "KEY_PREFIX": "p", "TARGET": "events:orders", "TARGET_EVENT_SOURCE": "shop", "TARGET_DETAIL_TYPE": "order"}
	cfg, err := sqsonce.ConfigFromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Target != "events:orders" || cfg.TargetEventSource != "shop" || cfg.TargetDetailType != "order" {
		t.Errorf("got %+v", cfg)
	}
}
