package sqsonce

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/keyprefix"
	"github.com/sqs-once/sqs-once/sqsonce/store/memstore"
)

func TestConfigFromEnvDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := ConfigFromEnv(envconfig.Map(map[string]string{
		"IDEMPOTENCY_TABLE":        "idem",
		"AWS_LAMBDA_FUNCTION_NAME": "orders-processor",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.KeyPrefix != "orders-processor" || cfg.FunctionName != "orders-processor" || cfg.Key.String() != "messageId" || cfg.LockTimeout != 0 ||
		cfg.DedupeWindow != 24*time.Hour || cfg.InProgress != InProgressRetry || cfg.MaxConcurrency != 10 ||
		cfg.FailureBackoffBase != 0 || cfg.OperatorQueueURL != "" || cfg.ValidatePayload || cfg.LocalCache != 0 || cfg.QueueURL != "" {
		t.Errorf("defaults: %+v", cfg)
	}
}

func TestConfigFromEnvNamesEveryBadVariable(t *testing.T) {
	t.Parallel()
	_, err := ConfigFromEnv(envconfig.Map(map[string]string{
		"IDEMPOTENCY_KEY":      "header:x",
		"LOCK_TIMEOUT":         "0",
		"DEDUPE_WINDOW":        "forever",
		"IN_PROGRESS":          "wait",
		"MAX_CONCURRENCY":      "0",
		"FAILURE_BACKOFF_BASE": "-1",
		"OPERATOR_QUEUE_URL":   "operator",
	}))
	for _, name := range []string{"KEY_PREFIX", "IDEMPOTENCY_KEY", "LOCK_TIMEOUT", "DEDUPE_WINDOW",
		"IN_PROGRESS", "MAX_CONCURRENCY", "FAILURE_BACKOFF_BASE", "OPERATOR_QUEUE_URL"} {
		if err == nil || !strings.Contains(err.Error(), name+":") {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
}

func TestConfigFromEnvRejectsCollidingKeyPrefixes(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"orders#v2", "orders fn", strings.Repeat("p", 129),
		"orders\u00a0fn",                                 // no-break space
		"orders\u2003fn",                                 // em space
		"orders\u200bfn",                                 // zero-width space: invisible in a console
		"orders\u0085fn",                                 // next line
		"orders\x00fn", "orders\x7ffn", "orders\u202efn", // NUL, DEL, right-to-left override
		"orders\xfffn", // not UTF-8
	} {
		_, err := ConfigFromEnv(envconfig.Map(map[string]string{"IDEMPOTENCY_TABLE": "t", "KEY_PREFIX": prefix}))
		if err == nil || !strings.Contains(err.Error(), "KEY_PREFIX") {
			t.Errorf("KEY_PREFIX=%q accepted (%v)", prefix, err)
		}
		if keyprefix.Check(prefix) == nil {
			t.Errorf("keyprefix.Check(%q) accepted", prefix)
		}
	}
}

func TestKeySource(t *testing.T) {
	t.Parallel()
	str := func(s string) events.SQSMessageAttribute {
		return events.SQSMessageAttribute{DataType: "String", StringValue: aws.String(s)}
	}
	tests := []struct {
		source  string
		msg     events.SQSMessage
		want    string
		wantErr string
	}{
		{"messageId", events.SQSMessage{MessageId: "m-1"}, "m-1", ""},
		{"messageId", events.SQSMessage{MessageId: "m-2", MessageAttributes: map[string]events.SQSMessageAttribute{
			"sqs-dlq-original-message-id": str("m-1")}}, "m-1", ""},
		{"body:/orderId", events.SQSMessage{Body: `{"orderId":"o-1"}`}, "o-1", ""},
		{"body:/orderId", events.SQSMessage{Body: `{"orderId":12345678901234567890}`}, "12345678901234567890", ""},
		{"body:/a~1b/c~0d/1", events.SQSMessage{Body: `{"a/b":{"c~d":["x","y"]}}`}, "y", ""},
		{"body:/orderId", events.SQSMessage{Body: `{"orderId":""}`}, "", "empty value"},
		{"body:/orderId", events.SQSMessage{Body: `{"orderId":null}`}, "", "null"},
		{"body:/priority", events.SQSMessage{Body: `{"priority":true}`}, "", "boolean"},
		{"body:/orderId", events.SQSMessage{Body: `{"orderId":{"id":1}}`}, "", "object or array"},
		{"body:/orderId", events.SQSMessage{Body: `{}`}, "", "no member at /orderId"},
		{"body:/items/3", events.SQSMessage{Body: `{"items":[1]}`}, "", "no element at /items/3"},
		{"body:/orderId", events.SQSMessage{Body: `not json`}, "", "not JSON"},
		{"attribute:tenant", events.SQSMessage{MessageAttributes: map[string]events.SQSMessageAttribute{"tenant": str("t-9")}}, "t-9", ""},
		{"attribute:tenant", events.SQSMessage{}, "", `no message attribute "tenant"`},
		{"body:/k", events.SQSMessage{Body: `{"k":"` + strings.Repeat("x", 1025) + `"}`}, "", "exceeds"},
	}
	for _, tt := range tests {
		t.Run(tt.source+" "+tt.want+tt.wantErr, func(t *testing.T) {
			t.Parallel()
			src, err := parseKeySource(tt.source)
			if err != nil {
				t.Fatal(err)
			}
			got, err := src.keyOf(tt.msg, "IDEMPOTENCY_KEY", maxKeyBytes)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "IDEMPOTENCY_KEY="+tt.source) {
					t.Errorf("key = %q, %v; want ErrNoKey naming IDEMPOTENCY_KEY=%s and saying %q", got, err, tt.source, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("key = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestParseKeySourceRejects(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "messageid", "body:", "body:orderId", "body:/a~2", "body:/~~01", "body:/a~", "attribute:", "header:x"} {
		if _, err := parseKeySource(s); err == nil {
			t.Errorf("parseKeySource(%q) accepted", s)
		}
	}
}

// configFields are the fields of every ConfigError in err.
func configFields(err error) []string {
	var fields []string
	for _, e := range unjoin(err) {
		var ce *ConfigError
		if errors.As(e, &ce) {
			fields = append(fields, ce.Field)
		}
	}
	return fields
}

func TestNewFillsDefaultsAndNamesTheFieldThatCannotWork(t *testing.T) {
	t.Parallel()
	handler := func(context.Context, events.SQSMessage) error { return nil }
	// New builds the SQS client, and calls nothing (the endpoint, a closed
	// loopback port, could answer nothing).
	valid := ConsumerConfig{Config: Config{Store: memstore.New(), KeyPrefix: "p"}, AWS: aws.Config{Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:1")}}
	if _, err := NewConsumer(valid, handler); err != nil {
		t.Fatalf("zero values must mean the defaults (MaxConcurrency 0 used to hang): %v", err)
	}
	filled, err := valid.check(true)
	if err != nil {
		t.Fatal(err)
	}
	if filled.MaxConcurrency != 10 || filled.DedupeWindow != defaultDedupeWindow || filled.InProgress != InProgressRetry ||
		filled.LockTimeout != 0 || filled.FunctionName != "p" || filled.Test.Now == nil || filled.Logger == nil {
		t.Errorf("defaults not filled: %+v", filled)
	}
	tests := []struct {
		field  string
		modify func(*ConsumerConfig)
	}{
		{"Store", func(c *ConsumerConfig) { c.Store = nil }},
		{"KeyPrefix", func(c *ConsumerConfig) { c.KeyPrefix = "" }},
		{"KeyPrefix", func(c *ConsumerConfig) { c.KeyPrefix = "a#b" }},
		{"KeyPrefix", func(c *ConsumerConfig) { c.KeyPrefix = "a\u200bb" }},
		{"Key", func(c *ConsumerConfig) { c.Key = KeyFromBody("orderId") }},
		{"Key", func(c *ConsumerConfig) { c.Key = KeyFromAttribute("") }},
		{"Key", func(c *ConsumerConfig) { c.Key = KeyFunc(nil) }},
		{"MaxConcurrency", func(c *ConsumerConfig) { c.MaxConcurrency = -1 }},
		{"MaxConcurrency", func(c *ConsumerConfig) { c.MaxConcurrency = 1001 }},
		{"LockTimeout", func(c *ConsumerConfig) { c.LockTimeout = -time.Second }},
		{"LockTimeout", func(c *ConsumerConfig) { c.LockTimeout = 13 * time.Hour }},
		{"DedupeWindow", func(c *ConsumerConfig) { c.DedupeWindow = -time.Second }},
		{"InProgress", func(c *ConsumerConfig) { c.InProgress = "wait" }},
		{"FailureBackoffBase", func(c *ConsumerConfig) { c.FailureBackoffBase = 13 * time.Hour }},
		{"LocalCache", func(c *ConsumerConfig) { c.LocalCache = -1 }},
		{"Target", func(c *ConsumerConfig) { c.Target = deliverNothing{} }},
		// SQS calls (here the operator queue's) need an AWS configuration.
		{"AWS", func(c *ConsumerConfig) {
			c.AWS, c.OperatorQueueURL = aws.Config{}, "https://sqs.us-east-1.amazonaws.com/123456789012/operator"
		}},
	}
	for _, tt := range tests {
		cfg := valid
		tt.modify(&cfg)
		_, err := NewConsumer(cfg, handler)
		if got := configFields(err); !slices.Equal(got, []string{tt.field}) || !strings.Contains(err.Error(), "Config."+tt.field) {
			t.Errorf("%+v: error %v (fields %v), want a ConfigError naming Config.%s", cfg, err, got, tt.field)
		}
	}
}

// TestNewNamesTheVariableOfAConfigFromEnv: a Config that came from the
// environment and is still wrong when New sees it is an error naming the
// variable, not the field.
func TestNewNamesTheVariableOfAConfigFromEnv(t *testing.T) {
	t.Parallel()
	cfg, err := ConfigFromEnv(envconfig.Map(map[string]string{"IDEMPOTENCY_TABLE": "t", "KEY_PREFIX": "p"}))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store = memstore.New()
	cfg.AWS = aws.Config{Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:1")}
	cfg.MaxConcurrency = -1
	_, err = NewConsumer(cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "MAX_CONCURRENCY") || strings.Contains(err.Error(), "Config.") {
		t.Errorf("error %v, want one naming MAX_CONCURRENCY", err)
	}
}

// deliverNothing is a Target that never gets a record.
type deliverNothing struct{}

func (deliverNothing) Deliver(context.Context, []Delivery) []error { return nil }
