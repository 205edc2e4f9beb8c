package processor

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/internal/sqsmsg"
)

// ErrNoKey: the record does not carry the configured idempotency key, so it
// cannot be processed under the guard and is never processed without it.
var ErrNoKey = errors.New("idempotency key missing")

// maxKeyBytes keeps "<prefix>#<key>" within DynamoDB's 2048-byte partition
// key limit with room for the prefix.
const maxKeyBytes = 1024

// KeySource says where a record's idempotency key comes from.
type KeySource struct {
	kind string // "messageId", "body" or "attribute"
	// arg is the JSON pointer for "body", the attribute name for "attribute".
	arg    string
	tokens []string
}

// ParseKeySource parses IDEMPOTENCY_KEY: "messageId", "body:<JSON pointer>"
// (RFC 6901, e.g. "body:/orderId") or "attribute:<name>".
func ParseKeySource(s string) (KeySource, error) {
	kind, arg, _ := strings.Cut(s, ":")
	switch {
	case s == "messageId":
		return KeySource{kind: "messageId"}, nil
	case kind == "body":
		tokens, err := parsePointer(arg)
		if err != nil {
			return KeySource{}, err
		}
		return KeySource{kind: kind, arg: arg, tokens: tokens}, nil
	case kind == "attribute" && arg != "":
		return KeySource{kind: kind, arg: arg}, nil
	}
	return KeySource{}, fmt.Errorf("%q is not messageId, body:<JSON pointer> or attribute:<name>", s)
}

func (k KeySource) String() string {
	if k.kind == "messageId" || k.kind == "" {
		return "messageId"
	}
	return k.kind + ":" + k.arg
}

// Key returns the record's idempotency key.
func (k KeySource) Key(msg events.SQSMessage) (string, error) {
	key, err := k.key(msg)
	if err != nil {
		return "", fmt.Errorf("%w (IDEMPOTENCY_KEY=%s): %v", ErrNoKey, k, err)
	}
	if key == "" {
		return "", fmt.Errorf("%w (IDEMPOTENCY_KEY=%s): empty value", ErrNoKey, k)
	}
	if len(key) > maxKeyBytes {
		return "", fmt.Errorf("%w (IDEMPOTENCY_KEY=%s): value of %d bytes exceeds %d", ErrNoKey, k, len(key), maxKeyBytes)
	}
	return key, nil
}

func (k KeySource) key(msg events.SQSMessage) (string, error) {
	switch k.kind {
	case "body":
		return bodyKey(msg.Body, k.tokens)
	case "attribute":
		a, ok := msg.MessageAttributes[k.arg]
		if !ok {
			return "", fmt.Errorf("no message attribute %q", k.arg)
		}
		return attributeValue(a), nil
	}
	// The replayer re-sends a dead letter with a new messageId and records
	// the first one, so a replay of a completed message stays a duplicate.
	if a, ok := msg.MessageAttributes[sqsmsg.AttrOriginalMessageID]; ok {
		if v := attributeValue(a); v != "" {
			return v, nil
		}
	}
	return msg.MessageId, nil
}

func attributeValue(a events.SQSMessageAttribute) string {
	if a.StringValue != nil {
		return *a.StringValue
	}
	if len(a.BinaryValue) > 0 {
		return base64.StdEncoding.EncodeToString(a.BinaryValue)
	}
	return ""
}

func bodyKey(body string, tokens []string) (string, error) {
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("body is not JSON: %v", err)
	}
	for i, tok := range tokens {
		switch node := v.(type) {
		case map[string]any:
			next, ok := node[tok]
			if !ok {
				return "", fmt.Errorf("body has no member at %s", pointerPrefix(tokens[:i+1]))
			}
			v = next
		case []any:
			idx, err := strconv.Atoi(tok)
			if err != nil || idx < 0 || idx >= len(node) || (len(tok) > 1 && tok[0] == '0') {
				return "", fmt.Errorf("body has no element at %s", pointerPrefix(tokens[:i+1]))
			}
			v = node[idx]
		default:
			return "", fmt.Errorf("body has a scalar at %s", pointerPrefix(tokens[:i]))
		}
	}
	switch v := v.(type) {
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	case bool:
		// Two values for a whole stream of messages: all but the first of
		// each would be dropped as duplicates.
		return "", errors.New("value is a boolean, not a string or number")
	case nil:
		return "", errors.New("value is null")
	}
	// An object or array as a key would depend on the producer's member
	// order and spacing: two sends of one order could get different keys.
	return "", errors.New("value is an object or array, not a string or number")
}

// badEscape is a "~" that does not start "~0" or "~1".
var badEscape = regexp.MustCompile(`~([^01]|$)`)

// parsePointer splits an RFC 6901 JSON pointer into unescaped tokens.
func parsePointer(p string) ([]string, error) {
	if p == "" || p[0] != '/' {
		return nil, fmt.Errorf("JSON pointer %q must start with /", p)
	}
	parts := strings.Split(p[1:], "/")
	for i, part := range parts {
		if badEscape.MatchString(part) {
			return nil, fmt.Errorf("JSON pointer %q has an invalid escape in %q (use ~0 for ~ and ~1 for /)", p, part)
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

func pointerPrefix(tokens []string) string {
	var b bytes.Buffer
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1"))
	}
	return b.String()
}
