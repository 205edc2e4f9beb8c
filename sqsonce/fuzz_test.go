package sqsonce

// Fuzz targets of the parsers that read outside input in package sqsonce:
// the key a record's body or attributes give (KeySource) and the
// environment configuration (ConfigFromEnv). Plain `go test` runs their
// seeds and the corpus in testdata/fuzz; `make fuzz` searches further.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/sqsonce/sqsoncetest"
)

// FuzzKeyFromBody checks the key a JSON pointer reads from a body against
// encoding/json's reading of the same body: a key is only ever what
// encoding/json finds at the pointer (a string, or a number's literal
// text), valid UTF-8 of 1 to 1024 bytes, the same on every call, and the
// same for every spelling of that value (escapes, spacing, member order).
func FuzzKeyFromBody(f *testing.F) {
	for _, seed := range [][2]string{
		{"/orderId", `{"orderId":"A"}`},
		{"/orderId", `{"orderId":"\u0041"}`},
		{"/orderId", `{"order\u0049d":"A"}`},
		{"/orderId", `{"orderId":"\ud800"}`},
		{"/orderId", `{"orderId":"\ud83d\ude00"}`},
		{"/orderId", `{"orderId":"A","orderId":"B"}`},
		{"/orderId", `{"orderId":"A"} junk`},
		{"/orderId", `{"orderId":-12.5e3}`},
		{"/orderId", `{"orderId":null}`},
		{"/orderId", "{\"orderId\":\"A\xff\"}"},
		{"/items/1", `{"items":["a","b"]}`},
		{"/items/01", `{"items":["a","b"]}`},
		{"/items/+1", `{"items":["a","b"]}`},
		{"/items/-0", `{"items":["a","b"]}`},
		{"/a~1b/c~0d", `{"a/b":{"c~d":"x"}}`},
		{"/", `{"":"empty name"}`},
		{"/0", `["first"]`},
		{"orderId", `{"orderId":"A"}`},
		{"/x~2", `{}`},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pointer, body string) {
		src := KeyFromBody(pointer)
		parsed, perr := parseKeySource("body:" + pointer)
		tokens, valid := refPointer(pointer)
		if (perr == nil) != valid {
			t.Fatalf("parseKeySource(body:%q) = %v; the pointer is valid per RFC 6901: %t", pointer, perr, valid)
		}
		if !valid {
			return
		}
		msg := events.SQSMessage{MessageId: "m-1", Body: body}
		key, err := src.keyOf(msg, "ConsumerConfig.Key", maxKeyBytes)
		key2, err2 := parsed.keyOf(msg, "ConsumerConfig.Key", maxKeyBytes)
		if key != key2 || fmt.Sprint(err) != fmt.Sprint(err2) {
			t.Fatalf("KeyFromBody and parseKeySource disagree: %q, %v and %q, %v", key, err, key2, err2)
		}
		again, errAgain := src.keyOf(msg, "ConsumerConfig.Key", maxKeyBytes)
		if again != key || fmt.Sprint(errAgain) != fmt.Sprint(err) {
			t.Fatalf("same body, other answer: %q, %v then %q, %v", key, err, again, errAgain)
		}
		if err != nil {
			if !errors.Is(err, ErrNoKey) {
				t.Fatalf("refusal %v does not match ErrNoKey", err)
			}
			return
		}
		checkKey(t, key)

		// What encoding/json reads there must be the key.
		tree, ok := decodeStd(body)
		if !ok {
			t.Fatalf("key %q from a body encoding/json does not read as one JSON value: %q", key, body)
		}
		v, found := walk(tree, tokens)
		if !found {
			t.Fatalf("key %q from %q, where encoding/json finds nothing at %s", key, body, pointer)
		}
		switch v := v.(type) {
		case string:
			if v != key {
				t.Fatalf("key %q from %q, where encoding/json reads %q", key, body, v)
			}
		case json.Number:
			if v.String() != key {
				t.Fatalf("key %q from %q, where encoding/json reads the number %s", key, body, v)
			}
		default:
			t.Fatalf("key %q from %q, where encoding/json reads %T %v", key, body, v, v)
		}

		// Every other spelling of the same value gives the same key.
		for _, other := range []string{stdEncode(t, tree), asciiEncode(tree, false), asciiEncode(tree, true)} {
			k, err := src.keyOf(events.SQSMessage{MessageId: "m-1", Body: other}, "ConsumerConfig.Key", maxKeyBytes)
			if err != nil || k != key {
				t.Fatalf("%q gives key %q, but %q, the same value spelled otherwise, gives %q, %v", body, key, other, k, err)
			}
		}
	})
}

// FuzzParseKeySource reads any IDEMPOTENCY_KEY spelling and, when it is
// accepted, the key it gives a record with that body and attribute: never a
// panic, and a key is always valid UTF-8 of 1 to 1024 bytes, the same on
// every call (a key that is not UTF-8 would be stored as U+FFFD in
// DynamoDB, so two such keys would share one record).
func FuzzParseKeySource(f *testing.F) {
	f.Add("messageId", `{"orderId":"A"}`, "", []byte(nil), "")
	f.Add("messageId", "", "", []byte(nil), "original-1")
	f.Add("messageId", "", "", []byte(nil), "orig\xff")
	f.Add("body:/orderId", `{"orderId":"A"}`, "", []byte(nil), "")
	f.Add("body:", `{}`, "", []byte(nil), "")
	f.Add("body:/a~", `{}`, "", []byte(nil), "")
	f.Add("attribute:tenant", "", "t-1", []byte(nil), "")
	f.Add("attribute:tenant", "", "", []byte{0, 0xff}, "")
	f.Add("attribute:tenant", "", "t\xff", []byte(nil), "")
	f.Add("attribute:a:b", "", "x", []byte(nil), "")
	f.Add("attribute:", "", "", []byte(nil), "")
	f.Add("header:x", "", "", []byte(nil), "")
	f.Add("messageid", "", "", []byte(nil), "")
	f.Fuzz(func(t *testing.T, spec, body, attrText string, attrBinary []byte, origID string) {
		src, err := parseKeySource(spec)
		if err != nil {
			if !strings.Contains(err.Error(), spec) && !strings.Contains(err.Error(), strconv.Quote(spec)) &&
				!strings.Contains(err.Error(), "JSON pointer") && !strings.Contains(err.Error(), "attribute name") {
				t.Fatalf("parseKeySource(%q) = %v: the error does not say what is wrong", spec, err)
			}
			return
		}
		if src.String() != spec {
			t.Fatalf("parseKeySource(%q) spells itself %q", spec, src.String())
		}
		msg := events.SQSMessage{MessageId: "m-1", Body: body, MessageAttributes: map[string]events.SQSMessageAttribute{}}
		if name, ok := strings.CutPrefix(spec, "attribute:"); ok {
			a := events.SQSMessageAttribute{DataType: "Binary", BinaryValue: attrBinary}
			if attrText != "" {
				a = events.SQSMessageAttribute{DataType: "String", StringValue: &attrText}
			}
			msg.MessageAttributes[name] = a
		}
		if origID != "" {
			msg.MessageAttributes[sqsmsg.AttrOriginalMessageID] = events.SQSMessageAttribute{DataType: "String", StringValue: &origID}
		}
		key, err := src.keyOf(msg, "ConsumerConfig.Key", maxKeyBytes)
		again, errAgain := src.keyOf(msg, "ConsumerConfig.Key", maxKeyBytes)
		if again != key || fmt.Sprint(errAgain) != fmt.Sprint(err) {
			t.Fatalf("same record, other answer: %q, %v then %q, %v", key, err, again, errAgain)
		}
		if err != nil {
			if !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), spec) {
				t.Fatalf("refusal %v does not match ErrNoKey naming %s", err, spec)
			}
			return
		}
		checkKey(t, key)
		if spec == "messageId" && key != origID && key != "m-1" {
			t.Fatalf("messageId key %q is neither the original id %q nor the message id", key, origID)
		}
	})
}

// checkKey fails unless key could be a record's key: 1 to 1024 bytes of
// valid UTF-8.
func checkKey(t *testing.T, key string) {
	t.Helper()
	if key == "" || len(key) > 1024 || !utf8.ValidString(key) {
		t.Fatalf("key %q (%d bytes): not 1 to 1024 bytes of UTF-8", key, len(key))
	}
}

// refPointer is RFC 6901's reading of a pointer, written independently of
// key.go: "/" then tokens in which "~" only starts "~0" or "~1".
func refPointer(p string) ([]string, bool) {
	if !strings.HasPrefix(p, "/") {
		return nil, false
	}
	var tokens []string
	for _, part := range strings.Split(p[1:], "/") {
		var b strings.Builder
		for i := 0; i < len(part); i++ {
			if part[i] != '~' {
				b.WriteByte(part[i])
				continue
			}
			if i+1 == len(part) || (part[i+1] != '0' && part[i+1] != '1') {
				return nil, false
			}
			b.WriteByte("~/"[part[i+1]-'0'])
			i++
		}
		tokens = append(tokens, b.String())
	}
	return tokens, true
}

// decodeStd is encoding/json's reading of body, numbers kept as written;
// ok is false unless body is exactly one JSON value.
func decodeStd(body string) (any, bool) {
	if !json.Valid([]byte(body)) {
		return nil, false
	}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	var v any
	return v, dec.Decode(&v) == nil
}

// walk follows tokens through v, array indexes as RFC 6901 spells them
// ("0", or digits without a leading zero).
func walk(v any, tokens []string) (any, bool) {
	for _, tok := range tokens {
		switch c := v.(type) {
		case map[string]any:
			next, ok := c[tok]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			if tok == "" || (len(tok) > 1 && tok[0] == '0') || strings.Trim(tok, "0123456789") != "" {
				return nil, false
			}
			i, err := strconv.Atoi(tok)
			if err != nil || i >= len(c) {
				return nil, false
			}
			v = c[i]
		default:
			return nil, false
		}
	}
	return v, true
}

func stdEncode(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// asciiEncode spells v with every string character but letters and digits
// as a \u escape (surrogate pairs beyond the BMP), hex in upper or lower
// case, members in reverse order and spaces around every token: the same
// value as stdEncode's, in other bytes.
func asciiEncode(v any, upper bool) string {
	var b bytes.Buffer
	var enc func(v any)
	str := func(s string) {
		b.WriteByte('"')
		for _, r := range s {
			if r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				b.WriteRune(r)
				continue
			}
			units := []rune{r}
			if r > 0xffff {
				hi, lo := utf16.EncodeRune(r)
				units = []rune{hi, lo}
			}
			for _, u := range units {
				if upper {
					fmt.Fprintf(&b, `\u%04X`, u)
				} else {
					fmt.Fprintf(&b, `\u%04x`, u)
				}
			}
		}
		b.WriteByte('"')
	}
	enc = func(v any) {
		b.WriteString(" ")
		switch v := v.(type) {
		case map[string]any:
			names := slices.Sorted(func(yield func(string) bool) {
				for k := range v {
					if !yield(k) {
						return
					}
				}
			})
			slices.Reverse(names)
			b.WriteString("{")
			for i, k := range names {
				if i > 0 {
					b.WriteString(" ,")
				}
				str(k)
				b.WriteString(" :")
				enc(v[k])
			}
			b.WriteString(" }")
		case []any:
			b.WriteString("[")
			for i, e := range v {
				if i > 0 {
					b.WriteString(" ,")
				}
				enc(e)
			}
			b.WriteString(" ]")
		case string:
			str(v)
		case json.Number:
			b.WriteString(v.String())
		case bool:
			b.WriteString(strconv.FormatBool(v))
		case nil:
			b.WriteString("null")
		}
		b.WriteString("\n")
	}
	enc(v)
	return b.String()
}

// envVars are the variables ConfigFromEnv reads, in FuzzConfigFromEnv's
// argument order.
var envVars = []string{
	"IDEMPOTENCY_TABLE", "AWS_LAMBDA_FUNCTION_NAME", "KEY_PREFIX", "IDEMPOTENCY_KEY", "LOCK_TIMEOUT",
	"DEDUPE_WINDOW", "IN_PROGRESS", "MAX_CONCURRENCY", "FAILURE_BACKOFF_BASE", "OPERATOR_QUEUE_URL",
	"PAYLOAD_VALIDATION", "LOCAL_CACHE", "QUEUE_URL",
}

// FuzzConfigFromEnv reads arbitrary values of every variable (unset where
// the mask's bit is set): never a panic; a refusal names only variables
// ConfigFromEnv reads, each as "environment variable NAME: ..."; an
// accepted configuration, with a Store, makes a Processor, refused only
// for want of an AWS configuration when it calls SQS, and with one always.
func FuzzConfigFromEnv(f *testing.F) {
	for _, s := range []struct {
		unset uint16
		v     [13]string
	}{
		{0, [13]string{"idem", "orders-fn", "", "messageId"}},
		{0, [13]string{"idem", "", "orders", "body:/orderId", "30", "86400", "drop", "5", "2", "https://sqs.us-east-1.amazonaws.com/123456789012/op",
			"on", "1000", "https://sqs.us-east-1.amazonaws.com/123456789012/main"}},
		{0, [13]string{"", "", "", "header:x", "0", "forever", "wait", "0", "-1", "operator", "maybe", "-1", "ftp://x"}},
		{0, [13]string{"idem", "fn", "a#b", "body:/a~", "43200.0000001", "31622400", "retry", "1000", "43200", "", "off", "1000000", ""}},
		{0, [13]string{" idem ", "fn\xff", "", "attribute:", "1e-400", "NaN", " retry ", "+5", "0x1p3", "http://h/q", "on ", "1_000", "http://localhost:4566/000000000000/q"}},
		{0xffff, [13]string{}},
	} {
		v := s.v
		f.Add(s.unset, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12])
	}
	f.Fuzz(func(t *testing.T, unset uint16, table, function, prefix, key, lockTimeout, dedupeWindow, inProgress,
		maxConcurrency, failureBackoff, operatorQueue, payloadValidation, localCache, queueURL string) {
		values := []string{table, function, prefix, key, lockTimeout, dedupeWindow, inProgress,
			maxConcurrency, failureBackoff, operatorQueue, payloadValidation, localCache, queueURL}
		env := map[string]string{}
		for i, name := range envVars {
			if unset&(1<<i) == 0 {
				env[name] = values[i]
			}
		}
		lookup := envconfig.Map(env)
		cfg, err := ConfigFromEnv(lookup)
		if err != nil {
			checkVarErrors(t, err, envVars)
			return
		}
		// The same environment reads the same way.
		if _, err := ConfigFromEnv(lookup); err != nil {
			t.Fatalf("accepted once, refused the second time: %v", err)
		}
		cfg.Store = sqsoncetest.NewStore()
		_, err = NewConsumer(cfg, noop)
		callsSQS := cfg.OperatorQueueURL != "" || cfg.FailureBackoffBase > 0 || cfg.QueueURL != ""
		if err != nil {
			var ce *ConfigError
			if !callsSQS || !errors.As(err, &ce) || ce.Field != "AWS" || len(unjoinAll(err)) != 1 {
				t.Fatalf("ConfigFromEnv accepted %q, New refused it: %v", env, err)
			}
		}
		cfg.AWS = aws.Config{Region: "us-east-1"}
		if _, err := NewConsumer(cfg, noop); err != nil {
			t.Fatalf("ConfigFromEnv accepted %q, New refused it with an AWS configuration: %v", env, err)
		}
	})
}

func noop(context.Context, events.SQSMessage) error { return nil }

// checkVarErrors fails unless every error joined in err is an
// *envconfig.VarError naming one of names.
func checkVarErrors(t *testing.T, err error, names []string) {
	t.Helper()
	for _, e := range unjoinAll(err) {
		var ve *envconfig.VarError
		if !errors.As(e, &ve) || !slices.Contains(names, ve.Name) || !strings.HasPrefix(e.Error(), "environment variable "+ve.Name+": ") {
			t.Fatalf("error %q does not name one of the variables read", e)
		}
	}
}

func unjoinAll(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var all []error
		for _, e := range j.Unwrap() {
			all = append(all, unjoinAll(e)...)
		}
		return all
	}
	return []error{err}
}
