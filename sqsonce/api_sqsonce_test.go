package sqsonce

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/sqsonce/sqsoncetest"
)

// The tests of what a user of package sqsonce relies on (api_*_test.go):
// they need only Go, except where a file says otherwise.

// apiWithoutAWS unsets every AWS_ variable for the test (t.Setenv restores
// them afterwards), as on a machine where AWS was never set up.
func apiWithoutAWS(t *testing.T) {
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "AWS_") {
			t.Setenv(name, "")
			if err := os.Unsetenv(name); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestAPIWithoutAWS is the headline: a Processor on sqsoncetest's
// store, with no AWS configuration, region, credentials or environment at
// all, does what a user relies on. It cannot reach the network: with a
// Store and none of the SQS settings, New builds no AWS client, and one
// built from the zero aws.Config would fail before any request (no region,
// no endpoint).
func TestAPIWithoutAWS(t *testing.T) {
	apiWithoutAWS(t)
	ctx := context.Background()
	var mu sync.Mutex
	runs := map[string]int{}
	handle := func(ctx context.Context, msg events.SQSMessage) error {
		mu.Lock()
		defer mu.Unlock()
		runs[msg.MessageId]++
		return nil
	}
	p, err := NewConsumer(ConsumerConfig{Config: Config{Store: sqsoncetest.NewStore(), KeyPrefix: "app"}}, handle)
	if err != nil {
		t.Fatalf("New: %v", err)
	}

	ran := 0
	once := func(context.Context) error { ran++; return nil }
	if err := p.Do(ctx, "invoice-1", once); err != nil || ran != 1 {
		t.Fatalf("first Do: %v after %d runs, want nil after 1", err, ran)
	}
	if err := p.Do(ctx, "invoice-1", once); !errors.Is(err, ErrDuplicate) || ran != 1 {
		t.Errorf("second Do: %v after %d runs, want ErrDuplicate, not run again", err, ran)
	}
	// While one call holds a key, another (a second delivery, another
	// process) does not run.
	err = p.Do(ctx, "invoice-2", func(ctx context.Context) error {
		if err := p.Do(ctx, "invoice-2", once); !errors.Is(err, ErrInProgress) {
			t.Errorf("Do while another holds the key: %v, want ErrInProgress", err)
		}
		return nil
	})
	if err != nil || ran != 1 {
		t.Errorf("holder's Do: %v, %d runs of the other's function, want nil, none", err, ran-1)
	}

	// SQS delivers a message, then delivers it again.
	ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", Body: "order A-1", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders"}}}
	for i := range 2 {
		resp, err := p.Handle(ctx, ev)
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("delivery %d: %+v, %v; want it done", i+1, resp, err)
		}
	}
	if runs["m-1"] != 1 {
		t.Errorf("the handler ran %d times for two deliveries of m-1, want once", runs["m-1"])
	}
}

func TestAPIDoReportsWhatHappenedToTheFunction(t *testing.T) {
	t.Parallel()
	st := sqsoncetest.NewStore()
	cfg := Config{Store: st, KeyPrefix: "test", Logger: lockQuiet}
	p, err := New(cfg)
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
	if err := p.Do(ctx, "k", func(ctx context.Context) error { key, fence = Key(ctx), Fence(ctx); return nil }); err != nil {
		t.Fatalf("retry after a failure: %v, want nil: the lock was released", err)
	}
	if key != "k" || fence <= 0 {
		t.Errorf("fn saw key %q fence %d, want k and a positive fence", key, fence)
	}
	if err := p.Do(ctx, "k", func(context.Context) error { t.Error("ran twice"); return nil }); !errors.Is(err, ErrDuplicate) {
		t.Errorf("after success: %v, want ErrDuplicate", err)
	}

	// Another holder's live lock: another Processor on the same store.
	other, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		done <- other.Do(ctx, "busy", func(context.Context) error { close(inside); <-release; return nil })
	}()
	<-inside
	if err := p.Do(ctx, "busy", func(context.Context) error { t.Error("ran under another's lock"); return nil }); !errors.Is(err, ErrInProgress) {
		t.Errorf("under another holder's lock: %v, want ErrInProgress", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", strings.Repeat("k", 1025)} {
		if err := p.Do(ctx, bad, func(context.Context) error { t.Error("ran"); return nil }); !errors.Is(err, ErrNoKey) {
			t.Errorf("key of %d bytes: %v, want ErrNoKey", len(bad), err)
		}
	}
}

// apiVariables are the environment variables ConfigFromEnv reads: New's
// errors name none of them, since its Config came from Go.
var apiVariables = []string{"IDEMPOTENCY_TABLE", "KEY_PREFIX", "IDEMPOTENCY_KEY", "LOCK_TIMEOUT", "DEDUPE_WINDOW", "IN_PROGRESS",
	"MAX_CONCURRENCY", "FAILURE_BACKOFF_BASE", "OPERATOR_QUEUE_URL", "PAYLOAD_VALIDATION", "LOCAL_CACHE", "TARGET", "QUEUE_URL",
	"AWS_LAMBDA_FUNCTION_NAME"}

// apiTarget is a Target that accepts everything.
type apiTarget struct{}

func (apiTarget) Deliver(_ context.Context, msgs []Delivery) []error {
	return make([]error, len(msgs))
}

func TestAPIConfigErrorsNameTheField(t *testing.T) {
	t.Parallel()
	region := aws.Config{Region: "us-east-1"}
	handler := func(context.Context, events.SQSMessage) error { return nil }
	st := sqsoncetest.NewStore()
	tests := []struct {
		field   string
		cfg     ConsumerConfig
		handler Handler
	}{
		{"Store", ConsumerConfig{Config: Config{KeyPrefix: "p"}, AWS: region}, nil},
		{"KeyPrefix", ConsumerConfig{Config: Config{Store: st}}, nil},
		{"KeyPrefix", ConsumerConfig{Config: Config{Store: st, KeyPrefix: "a b"}}, nil},
		{"KeyPrefix", ConsumerConfig{Config: Config{Store: st, KeyPrefix: "orders#v2"}}, nil},
		{"Key", ConsumerConfig{Config: Config{Store: st, KeyPrefix: "p"}, Key: KeyFromBody("orderId")}, nil},
		{"Key", ConsumerConfig{Config: Config{Store: st, KeyPrefix: "p"}, Key: KeyFromAttribute("")}, nil},
		{"Key", ConsumerConfig{Config: Config{Store: st, KeyPrefix: "p"}, Key: KeyFunc(nil)}, nil},
		{"LockTimeout", ConsumerConfig{Config: Config{Store: st, KeyPrefix: "p", LockTimeout: 13 * time.Hour}}, nil},
		{"DedupeWindow", ConsumerConfig{Config: Config{Store: st, KeyPrefix: "p", DedupeWindow: -time.Second}}, nil},
		{"InProgress", ConsumerConfig{Config: Config{Store: st, KeyPrefix: "p"}, InProgress: "later"}, nil},
		{"MaxConcurrency", ConsumerConfig{Config: Config{Store: st, KeyPrefix: "p"}, MaxConcurrency: -1}, nil},
		{"MaxConcurrency", ConsumerConfig{Config: Config{Store: st, KeyPrefix: "p"}, MaxConcurrency: 1001}, nil},
		{"LocalCache", ConsumerConfig{Config: Config{Store: st, KeyPrefix: "p", LocalCache: -1}}, nil},
		{"FailureBackoffBase", ConsumerConfig{Config: Config{Store: st, KeyPrefix: "p"}, FailureBackoffBase: -time.Second}, nil},
		// A store is required.
		{"Store", ConsumerConfig{Config: Config{KeyPrefix: "p"}}, nil},
		// SQS is called for an operator queue: it needs a region.
		{"AWS", ConsumerConfig{Config: Config{Store: st, KeyPrefix: "p"}, OperatorQueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/operator"}, nil},
		// Handle does not wait: a consumer refuses what only Do uses.
		{"WaitInProgress", ConsumerConfig{Config: Config{Store: st, KeyPrefix: "p", WaitInProgress: time.Second}}, handler},
		{"Target", ConsumerConfig{Config: Config{Store: st, KeyPrefix: "p"}, Target: apiTarget{}}, handler},
	}
	for _, tt := range tests {
		_, err := NewConsumer(tt.cfg, tt.handler)
		var ce *ConfigError
		if err == nil || !strings.Contains(err.Error(), "Config."+tt.field+":") || !errors.As(err, &ce) || ce.Field != tt.field {
			t.Errorf("%s: error %v, want one naming Config.%s", tt.field, err, tt.field)
			continue
		}
		for _, v := range apiVariables {
			if strings.Contains(err.Error(), v) {
				t.Errorf("%s: error %q names the environment variable %s, for a Config built in Go", tt.field, err, v)
			}
		}
	}

	// Every bad field at once, and nothing about AWS with a Store.
	_, err := NewConsumer(ConsumerConfig{Config: Config{Store: st, KeyPrefix: "a b", LocalCache: -1}, InProgress: "later"}, nil)
	for _, field := range []string{"KeyPrefix", "InProgress", "LocalCache"} {
		if err == nil || !strings.Contains(err.Error(), "Config."+field+":") {
			t.Errorf("error %v does not name Config.%s", err, field)
		}
	}
	if err != nil && strings.Contains(err.Error(), "Config.AWS") {
		t.Errorf("error %v asks for AWS, for a Config with a Store and no SQS", err)
	}
	// A Target without a Handler, or a Handler alone, is a Processor.
	if _, err := NewConsumer(ConsumerConfig{Config: Config{Store: st, KeyPrefix: "p"}, Target: apiTarget{}}, nil); err != nil {
		t.Errorf("a Target alone: %v", err)
	}
	if _, err := NewConsumer(ConsumerConfig{Config: Config{Store: st, KeyPrefix: "p"}}, handler); err != nil {
		t.Errorf("a Handler on a Store, without AWS: %v", err)
	}
}

func apiLookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func TestAPIConfigFromEnvReadsTheDeployedFunctionsVariables(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"IDEMPOTENCY_TABLE": "orders-idem", "AWS_LAMBDA_FUNCTION_NAME": "orders-fn", "IDEMPOTENCY_KEY": "body:/orderId",
		"LOCK_TIMEOUT": "9", "DEDUPE_WINDOW": "3600", "IN_PROGRESS": "drop", "MAX_CONCURRENCY": "3",
		"PAYLOAD_VALIDATION": "on", "LOCAL_CACHE": "50", "FAILURE_BACKOFF_BASE": "2",
		"OPERATOR_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/operator",
		"QUEUE_URL":          "https://sqs.us-east-1.amazonaws.com/123456789012/orders",
	}
	cfg, err := ConfigFromEnv(apiLookup(env))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.KeyPrefix != "orders-fn" || cfg.FunctionName != "orders-fn" || cfg.Key.String() != "body:/orderId" ||
		cfg.LockTimeout != 9*time.Second || cfg.DedupeWindow != time.Hour || cfg.InProgress != InProgressDrop ||
		cfg.MaxConcurrency != 3 || !cfg.ValidatePayload || cfg.LocalCache != 50 || cfg.FailureBackoffBase != 2*time.Second ||
		cfg.OperatorQueueURL != env["OPERATOR_QUEUE_URL"] || cfg.QueueURL != env["QUEUE_URL"] {
		t.Errorf("ConfigFromEnv = %+v", cfg)
	}
	// KEY_PREFIX, when set, is the prefix; the function name stays the
	// metrics' dimension.
	env["KEY_PREFIX"] = "orders"
	if cfg, err := ConfigFromEnv(apiLookup(env)); err != nil || cfg.KeyPrefix != "orders" || cfg.FunctionName != "orders-fn" {
		t.Errorf("with KEY_PREFIX: %+v, %v", cfg, err)
	}
	// The defaults of what is not set.
	cfg, err = ConfigFromEnv(apiLookup(map[string]string{"IDEMPOTENCY_TABLE": "t", "KEY_PREFIX": "p"}))
	if err != nil || cfg.Key.String() != "messageId" || cfg.LockTimeout != 0 || cfg.DedupeWindow != defaultDedupeWindow ||
		cfg.InProgress != InProgressRetry || cfg.MaxConcurrency != 10 || cfg.ValidatePayload || cfg.LocalCache != 0 || cfg.Target != nil {
		t.Errorf("defaults: %+v, %v", cfg, err)
	}
}

func TestAPIConfigFromEnvErrorsNameTheVariables(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		bad  []string
	}{
		// IDEMPOTENCY_TABLE is the DynamoDB store's (dynamostore.FromEnv).
		{"nothing set", map[string]string{}, []string{"KEY_PREFIX"}},
		{"every value wrong", map[string]string{
			"IDEMPOTENCY_TABLE": "t", "KEY_PREFIX": "orders#v2", "IDEMPOTENCY_KEY": "body:orderId", "IN_PROGRESS": "later",
			"MAX_CONCURRENCY": "0", "LOCAL_CACHE": "-1", "LOCK_TIMEOUT": "forever", "DEDUPE_WINDOW": "0",
			"PAYLOAD_VALIDATION": "yes", "FAILURE_BACKOFF_BASE": "-1", "OPERATOR_QUEUE_URL": "operator", "QUEUE_URL": "orders",
		}, []string{"KEY_PREFIX", "IDEMPOTENCY_KEY", "IN_PROGRESS", "MAX_CONCURRENCY", "LOCAL_CACHE", "LOCK_TIMEOUT", "DEDUPE_WINDOW",
			"PAYLOAD_VALIDATION", "FAILURE_BACKOFF_BASE", "OPERATOR_QUEUE_URL", "QUEUE_URL"}},
	}
	for _, tt := range tests {
		_, err := ConfigFromEnv(apiLookup(tt.env))
		if err == nil {
			t.Errorf("%s: no error", tt.name)
			continue
		}
		for _, v := range tt.bad {
			if !strings.Contains(err.Error(), "environment variable "+v+":") {
				t.Errorf("%s: error does not name %s:\n%v", tt.name, v, err)
			}
		}
		if strings.Contains(err.Error(), "Config.") {
			t.Errorf("%s: error names a Config field, for a configuration from the environment:\n%v", tt.name, err)
		}
	}
}

// TestAPIFromEnvWithATargetIsAnError: FromEnv runs a Handler, so TARGET set
// (cmd/processor's variable) is an error naming it, before any AWS call.
func TestAPIFromEnvWithATargetIsAnError(t *testing.T) {
	apiWithoutAWS(t)
	t.Setenv("TARGET", "sqs:https://sqs.us-east-1.amazonaws.com/123456789012/q")
	t.Setenv("IDEMPOTENCY_TABLE", "t")
	t.Setenv("KEY_PREFIX", "p")
	p, err := FromEnv(os.LookupEnv, ConsumerConfig{Config: Config{Store: sqsoncetest.NewStore()}}, func(context.Context, events.SQSMessage) error { return nil })
	if p != nil || err == nil || !strings.Contains(err.Error(), "TARGET") {
		t.Errorf("FromEnv with TARGET set: %v, %v; want an error naming TARGET", p, err)
	}
}

func TestAPIAProcessorWithoutHandlerRefusesEvents(t *testing.T) {
	t.Parallel()
	p, err := New(Config{Store: sqsoncetest.NewStore(), KeyPrefix: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m"}}}); !errors.Is(err, ErrNoHandler) {
		t.Errorf("Handle without a handler: %v, want ErrNoHandler (an invocation error, so nothing is deleted)", err)
	}
}

func TestAPIKeyFuncAndLocalCacheCostNoCallForARepeatedDuplicate(t *testing.T) {
	lockOnEachStore(t, func(t *testing.T, e *lockEnv) {
		runs := 0
		p, err := NewConsumer(ConsumerConfig{
			Config: Config{
				Store:      e.store,
				KeyPrefix:  "test",
				LocalCache: 100,
				Logger:     lockQuiet,
			},
			Key: KeyFunc(func(m events.SQSMessage) (string, error) {
				return m.MessageAttributes["tenant"].DataType + "/" + m.Body, nil
			}),
		}, func(context.Context, events.SQSMessage) error { runs++; return nil })
		if err != nil {
			t.Fatal(err)
		}
		msg := events.SQSMessage{MessageId: "m", Body: "order-1", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:q"}
		want := []int32{2, 0, 0} // new, then duplicates answered by the cache
		for i, w := range want {
			e.calls.Store(0)
			resp, err := p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg}})
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("delivery %d: %v %v", i, resp, err)
			}
			if got := e.calls.Load(); got != w {
				t.Errorf("delivery %d: %d table calls, want %d", i, got, w)
			}
		}
		if runs != 1 {
			t.Errorf("handler ran %d times, want 1", runs)
		}
	})
}
