package processor_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/processor"
)

func TestLoadConfigDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := processor.LoadConfig(envconfig.Map(map[string]string{
		"IDEMPOTENCY_TABLE":        "idem",
		"AWS_LAMBDA_FUNCTION_NAME": "orders-processor",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.KeyPrefix != "orders-processor" || cfg.Key.String() != "messageId" || cfg.LockTimeout != 0 ||
		cfg.DedupeWindow != 24*time.Hour || cfg.InProgress != "retry" || cfg.MaxConcurrency != 10 ||
		cfg.FailureBackoffBase != 0 || cfg.OperatorQueueURL != "" {
		t.Errorf("defaults: %+v", cfg)
	}
}

func TestLoadConfigNamesEveryBadVariable(t *testing.T) {
	t.Parallel()
	_, err := processor.LoadConfig(envconfig.Map(map[string]string{
		"IDEMPOTENCY_KEY":      "header:x",
		"LOCK_TIMEOUT":         "0",
		"DEDUPE_WINDOW":        "forever",
		"IN_PROGRESS":          "wait",
		"MAX_CONCURRENCY":      "0",
		"FAILURE_BACKOFF_BASE": "-1",
		"OPERATOR_QUEUE_URL":   "operator",
	}))
	for _, name := range []string{"IDEMPOTENCY_TABLE", "KEY_PREFIX", "IDEMPOTENCY_KEY", "LOCK_TIMEOUT", "DEDUPE_WINDOW",
		"IN_PROGRESS", "MAX_CONCURRENCY", "FAILURE_BACKOFF_BASE", "OPERATOR_QUEUE_URL"} {
		if err == nil || !strings.Contains(err.Error(), name+":") {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
}

func TestLoadConfigRejectsCollidingKeyPrefixes(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"orders#v2", "orders fn", strings.Repeat("p", 129),
		"orders\u00a0fn",                                 // no-break space
		"orders\u2003fn",                                 // em space
		"orders\u200bfn",                                 // zero-width space: invisible in a console
		"orders\u0085fn",                                 // next line
		"orders\x00fn", "orders\x7ffn", "orders\u202efn", // NUL, DEL, right-to-left override
		"orders\xfffn", // not UTF-8
	} {
		_, err := processor.LoadConfig(envconfig.Map(map[string]string{"IDEMPOTENCY_TABLE": "t", "KEY_PREFIX": prefix}))
		if err == nil || !strings.Contains(err.Error(), "KEY_PREFIX") {
			t.Errorf("KEY_PREFIX=%q accepted (%v)", prefix, err)
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
			src, err := processor.ParseKeySource(tt.source)
			if err != nil {
				t.Fatal(err)
			}
			got, err := src.Key(tt.msg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), tt.source) {
					t.Errorf("Key() = %q, %v; want an error naming %s and saying %q", got, err, tt.source, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Key() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestParseKeySourceRejects(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "messageid", "body:", "body:orderId", "body:/a~2", "body:/~~01", "body:/a~", "attribute:", "header:x"} {
		if _, err := processor.ParseKeySource(s); err == nil {
			t.Errorf("ParseKeySource(%q) accepted", s)
		}
	}
}

func TestNewFillsDefaultsAndNamesTheFieldThatCannotWork(t *testing.T) {
	t.Parallel()
	deps := processor.Deps{DynamoDB: &countingDynamo{}, SQS: &visibilityRecorder{}, Business: func(context.Context, events.SQSMessage) error { return nil }}
	valid := processor.Config{Table: "t", KeyPrefix: "p"}
	if _, err := processor.New(valid, deps); err != nil {
		t.Fatalf("zero values must mean the defaults (MaxConcurrency 0 used to hang): %v", err)
	}
	tests := []struct {
		field  string
		modify func(*processor.Config)
	}{
		{"Table", func(c *processor.Config) { c.Table = "" }},
		{"KeyPrefix", func(c *processor.Config) { c.KeyPrefix = "a#b" }},
		{"KeyPrefix", func(c *processor.Config) { c.KeyPrefix = "a\u200bb" }},
		{"MaxConcurrency", func(c *processor.Config) { c.MaxConcurrency = -1 }},
		{"LockTimeout", func(c *processor.Config) { c.LockTimeout = -time.Second }},
		{"DedupeWindow", func(c *processor.Config) { c.DedupeWindow = -time.Second }},
		{"InProgress", func(c *processor.Config) { c.InProgress = "wait" }},
		{"FailureBackoffBase", func(c *processor.Config) { c.FailureBackoffBase = 13 * time.Hour }},
	}
	for _, tt := range tests {
		cfg := valid
		tt.modify(&cfg)
		_, err := processor.New(cfg, deps)
		var ce *processor.ConfigError
		if !errors.As(err, &ce) || ce.Field != tt.field {
			t.Errorf("%+v: error %v, want a ConfigError naming %s", cfg, err, tt.field)
		}
	}
}
