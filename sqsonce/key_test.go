package sqsonce

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// keyOfSource is the key source spelled s reads from msg, its errors naming
// IDEMPOTENCY_KEY.
func keyOfSource(t *testing.T, s string, msg events.SQSMessage) (string, error) {
	t.Helper()
	src, err := parseKeySource(s)
	if err != nil {
		t.Fatal(err)
	}
	return src.keyOf(msg, "IDEMPOTENCY_KEY", maxKeyBytes)
}

// A body key must be one unambiguous string: whatever a producer writes,
// two messages get the same key only if their keys are the same string.
// Anything encoding/json would silently repair or pick (trailing data, a
// lone surrogate or invalid UTF-8 turned into U+FFFD, the last of two
// members of one name) is refused instead, with ErrNoKey and the problem.
func TestBodyKeyRefusesAmbiguousJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		source  string
		body    string
		want    string // the key, when accepted
		wantErr string // part of the error, when refused
	}{
		// Trailing data.
		{"junk after the value", "body:/orderId", `{"orderId":"A"} junk`, "", "after the JSON value"},
		{"a second value", "body:/orderId", `{"orderId":"A"}{"orderId":"B"}`, "", "after the JSON value"},
		{"a second scalar", "body:/orderId", `{"orderId":"A"} 1`, "", "after the JSON value"},
		{"whitespace after the value is fine", "body:/orderId", "{\"orderId\":\"A\"} \t\r\n", "A", ""},
		{"whitespace before the value is fine", "body:/orderId", "\n {\"orderId\":\"A\"}", "A", ""},
		{"bad JSON further on is still bad", "body:/orderId", `{"orderId":"A", "x": tru}`, "", "not JSON"},

		// Lone surrogates and invalid UTF-8 in the key's string.
		{"lone high surrogate", "body:/orderId", `{"orderId":"\ud800"}`, "", "lone surrogate"},
		{"another lone high surrogate", "body:/orderId", `{"orderId":"\udbff"}`, "", "lone surrogate"},
		{"lone low surrogate", "body:/orderId", `{"orderId":"x\udc00"}`, "", "lone surrogate"},
		{"high surrogate then a non-surrogate escape", "body:/orderId", `{"orderId":"\ud800\u0041"}`, "", "lone surrogate"},
		{"high surrogate at the end", "body:/orderId", `{"orderId":"x\uD83D"}`, "", "lone surrogate"},
		{"two high surrogates", "body:/orderId", `{"orderId":"\ud83d\ud83d"}`, "", "lone surrogate"},
		{"invalid UTF-8 byte", "body:/orderId", "{\"orderId\":\"A\xff\"}", "", "not valid UTF-8"},
		{"truncated UTF-8 sequence", "body:/orderId", "{\"orderId\":\"A\xe2\x82\"}", "", "not valid UTF-8"},
		{"valid surrogate pair", "body:/orderId", `{"orderId":"\ud83d\ude00"}`, "😀", ""},
		{"valid pair in upper case", "body:/orderId", `{"orderId":"\uD83D\uDE00"}`, "😀", ""},
		{"the same character written literally", "body:/orderId", `{"orderId":"😀"}`, "😀", ""},
		{"an escaped backslash before u is no escape", "body:/orderId", `{"orderId":"\\ud800"}`, `\ud800`, ""},
		{"U+FFFD itself is a character like any other", "body:/orderId", `{"orderId":"\ufffd"}`, "\ufffd", ""},
		{"a lone surrogate elsewhere is not the key's business", "body:/orderId", `{"note":"\ud800","orderId":"A"}`, "A", ""},

		// Duplicate member names along the pointer's path.
		{"duplicate key member", "body:/orderId", `{"orderId":"A","orderId":"B"}`, "", `duplicate member "orderId" at /orderId`},
		{"duplicate spelled differently", "body:/orderId", `{"orderId":"A","order\u0049d":"A"}`, "", `duplicate member "orderId"`},
		{"duplicate parent", "body:/order/id", `{"order":{"id":"A"},"order":{"id":"B"}}`, "", `duplicate member "order" at /order`},
		{"duplicate inside the value's parent", "body:/order/id", `{"order":{"id":"A","id":"A"}}`, "", `duplicate member "id" at /order/id`},
		{"duplicates off the path are not the key's business", "body:/orderId", `{"x":1,"x":2,"orderId":"A"}`, "A", ""},
		{"member name with a lone surrogate on the path", "body:/\ufffd", `{"\ud800":"A"}`, "", "lone surrogate"},

		// Numbers are still their literal text; arrays still by index.
		{"number", "body:/orderId", `{"orderId":-12.5e3}`, "-12.5e3", ""},
		{"array element", "body:/items/1", `{"items":["a","\ud83d\ude00"]}`, "😀", ""},
		{"white space everywhere", "body:/items/1", "{ \"items\" :\n[ \"a\" ,\t\"b\" ] , \"x\" : 1 }", "b", ""},
		{"array element with a lone surrogate", "body:/items/1", `{"items":["a","\ud800"]}`, "", "lone surrogate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := keyOfSource(t, tt.source, events.SQSMessage{MessageId: "m-1", Body: tt.body})
			if tt.wantErr != "" {
				if !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), tt.source) {
					t.Errorf("key(%s) = %q, %v; want ErrNoKey naming %s and saying %q", tt.body, got, err, tt.source, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("key(%s) = %q, %v; want %q", tt.body, got, err, tt.want)
			}
		})
	}
}

// The collisions the refusals prevent: before them, each pair got one key.
func TestBodyKeysDoNotCollide(t *testing.T) {
	t.Parallel()
	for _, pair := range [][2]string{
		{`{"orderId":"\ud800"}`, `{"orderId":"\udbff"}`},
		{"{\"orderId\":\"\xff\"}", "{\"orderId\":\"\xfe\"}"},
		{`{"orderId":"A","orderId":"B"}`, `{"orderId":"C","orderId":"B"}`},
		{`{"orderId":"B"} junk`, `{"orderId":"B"}{"orderId":"C"}`},
	} {
		k0, err0 := keyOfSource(t, "body:/orderId", events.SQSMessage{Body: pair[0]})
		k1, err1 := keyOfSource(t, "body:/orderId", events.SQSMessage{Body: pair[1]})
		if err0 == nil && err1 == nil && k0 == k1 {
			t.Errorf("%s and %s both get key %q", pair[0], pair[1], k0)
		}
	}
}

// Attribute keys are taken as they arrive: a String (or Number) value as it
// is, a Binary one in base64. Lambda's event is JSON that Go decodes, and
// SQS accepts only valid XML characters in String values, so no lone
// surrogate or invalid UTF-8 can reach a String attribute: nothing to refuse
// there. The replayer's original id is read the same way, whatever its type.
func TestAttributeKeys(t *testing.T) {
	t.Parallel()
	s := func(v string) *string { return &v }
	tests := []struct {
		name   string
		source string
		attrs  map[string]events.SQSMessageAttribute
		want   string
	}{
		{"String attribute", "attribute:tenant", map[string]events.SQSMessageAttribute{"tenant": {DataType: "String", StringValue: s("t-1")}}, "t-1"},
		{"Binary attribute", "attribute:tenant", map[string]events.SQSMessageAttribute{"tenant": {DataType: "Binary", BinaryValue: []byte{0, 0xff}}}, "AP8="},
		{"String original id", "messageId", map[string]events.SQSMessageAttribute{"sqs-dlq-original-message-id": {DataType: "String", StringValue: s("m-0")}}, "m-0"},
		{"Binary original id", "messageId", map[string]events.SQSMessageAttribute{"sqs-dlq-original-message-id": {DataType: "Binary.uuid", BinaryValue: []byte{0, 0xff}}}, "AP8="},
		{"original id without a value", "messageId", map[string]events.SQSMessageAttribute{"sqs-dlq-original-message-id": {DataType: "Binary"}}, "m-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got, err := keyOfSource(t, tt.source, events.SQSMessage{MessageId: "m-1", MessageAttributes: tt.attrs}); err != nil || got != tt.want {
				t.Errorf("key = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// The IDEMPOTENCY_KEY spellings parse into the typed sources, which spell
// themselves back; a key function's result is checked like any key's and
// named by its Config field.
func TestTypedKeySources(t *testing.T) {
	t.Parallel()
	for spelling, typed := range map[string]KeySource{
		"messageId":         KeyFromMessageID(),
		"body:/a~1b/c":      KeyFromBody("/a~1b/c"),
		"attribute:tenant":  KeyFromAttribute("tenant"),
		"attribute:a:b":     KeyFromAttribute("a:b"),
		"body:/orders/0/id": KeyFromBody("/orders/0/id"),
	} {
		parsed, err := parseKeySource(spelling)
		if err != nil || !reflect.DeepEqual(parsed, typed) || typed.String() != spelling {
			t.Errorf("parseKeySource(%q) = %#v, %v; want %#v, spelled %q (it spells %q)", spelling, parsed, err, typed, spelling, typed.String())
		}
	}
	if (KeySource{}).String() != "messageId" {
		t.Errorf("the zero KeySource is %q, want messageId", KeySource{})
	}
	fn := KeyFunc(func(m events.SQSMessage) (string, error) {
		if m.Body == "" {
			return "", errors.New("empty body")
		}
		return m.Body, nil
	})
	if got, err := fn.keyOf(events.SQSMessage{Body: "k-1"}, "ConsumerConfig.Key", maxKeyBytes); err != nil || got != "k-1" {
		t.Errorf("KeyFunc key = %q, %v; want k-1", got, err)
	}
	for body, want := range map[string]string{"": "empty body", strings.Repeat("x", 1025): "exceeds"} {
		if _, err := fn.keyOf(events.SQSMessage{Body: body}, "ConsumerConfig.Key", maxKeyBytes); !errors.Is(err, ErrNoKey) ||
			!strings.Contains(err.Error(), "ConsumerConfig.Key=a key function") || !strings.Contains(err.Error(), want) {
			t.Errorf("KeyFunc refusal %v, want ErrNoKey naming ConsumerConfig.Key and saying %q", err, want)
		}
	}
}
