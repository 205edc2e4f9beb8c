package sqsonce

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/internal/sqsmsg"
)

// KeySource says where a record's idempotency key comes from; the zero
// value is KeyFromMessageID.
type KeySource struct {
	kind string // "" (messageId), "body", "attribute" or "func"
	// arg is the JSON pointer for "body", the attribute name for "attribute".
	arg    string
	tokens []string
	// err is KeyFromBody's refusal of its pointer, reported by New.
	err error
	fn  func(events.SQSMessage) (string, error)
}

// KeyFromMessageID keys each record by its message id (a replayed copy's
// original id): SQS's redeliveries are duplicates, a producer's re-send is
// not (key that by its body).
func KeyFromMessageID() KeySource { return KeySource{} }

// KeyFromBody keys each record by the string or number at pointer (RFC
// 6901, such as "/orderId") in its JSON body, read strictly
// (docs/processor.md, "Keys"); a record without it has no key.
func KeyFromBody(pointer string) KeySource {
	tokens, err := parsePointer(pointer)
	return KeySource{kind: "body", arg: pointer, tokens: tokens, err: err}
}

// KeyFromAttribute keys each record by the value of its message attribute
// name.
func KeyFromAttribute(name string) KeySource {
	ks := KeySource{kind: "attribute", arg: name}
	if name == "" {
		ks.err = errors.New("empty attribute name")
	}
	return ks
}

// KeyFunc keys each record by f's result, checked like any key (not empty,
// at most 1024 bytes, UTF-8); an error leaves the record without a key.
func KeyFunc(f func(msg events.SQSMessage) (string, error)) KeySource {
	ks := KeySource{kind: "func", fn: f}
	if f == nil {
		ks.err = errors.New("nil function")
	}
	return ks
}

// parseKeySource reads IDEMPOTENCY_KEY's spelling of a KeySource:
// "messageId", "body:<JSON pointer>" (such as "body:/orderId") or
// "attribute:<name>".
func parseKeySource(s string) (KeySource, error) {
	kind, arg, _ := strings.Cut(s, ":")
	var ks KeySource
	switch {
	case s == "messageId":
		return KeyFromMessageID(), nil
	case kind == "body":
		ks = KeyFromBody(arg)
	case kind == "attribute" && arg != "":
		ks = KeyFromAttribute(arg)
	default:
		return KeySource{}, fmt.Errorf("%q is not messageId, body:<JSON pointer> or attribute:<name>", s)
	}
	return ks, ks.err
}

// String is the key source as IDEMPOTENCY_KEY spells it ("a key function"
// for KeyFunc).
func (k KeySource) String() string {
	switch k.kind {
	case "":
		return "messageId"
	case "func":
		return "a key function"
	}
	return k.kind + ":" + k.arg
}

// keyOf returns the record's idempotency key, of at most maxBytes bytes (0:
// any length, for hashed keys). setting names where the key source came
// from, for the error: "IDEMPOTENCY_KEY" or "ConsumerConfig.Key".
func (k KeySource) keyOf(msg events.SQSMessage, setting string, maxBytes int) (string, error) {
	key, err := k.key(msg)
	if err != nil {
		return "", fmt.Errorf("%w (%s=%s): %v", ErrNoKey, setting, k, err)
	}
	if key == "" {
		return "", fmt.Errorf("%w (%s=%s): empty value", ErrNoKey, setting, k)
	}
	if maxBytes > 0 && len(key) > maxBytes {
		return "", fmt.Errorf("%w (%s=%s): value of %d bytes exceeds %d (HashKeys lifts the limit)", ErrNoKey, setting, k, len(key), maxBytes)
	}
	// DynamoDB strings are UTF-8, and the SDK writes each invalid byte as
	// U+FFFD: two such keys (a KeyFunc's raw hash, say) would share a record.
	if !utf8.ValidString(key) {
		return "", fmt.Errorf("%w (%s=%s): value %q is not valid UTF-8", ErrNoKey, setting, k, key)
	}
	return key, nil
}

func (k KeySource) key(msg events.SQSMessage) (string, error) {
	switch k.kind {
	case "func":
		return k.fn(msg)
	case "body":
		return bodyKey(msg.Body, k.tokens)
	case "attribute":
		a, ok := msg.MessageAttributes[k.arg]
		if !ok {
			return "", fmt.Errorf("no message attribute %q", k.arg)
		}
		return sqsmsg.AttributeText(a), nil
	}
	// The replayer re-sends a dead letter with a new messageId and records
	// the first one, so a replay of a completed message stays a duplicate.
	if v, ok := sqsmsg.OriginalMessageID(msg); ok {
		return v, nil
	}
	return msg.MessageId, nil
}

// bodyKey is the value at the JSON pointer tokens in body. The key must be
// one unambiguous string, so the body is read more strictly than
// encoding/json does: data after the JSON value, a member of the path that
// appears twice (encoding/json keeps the last one), and a key string with a
// lone surrogate escape or invalid UTF-8 (encoding/json turns every one of
// them into U+FFFD, so "\ud800" and "\udbff" would be one key) are refused.
func bodyKey(body string, tokens []string) (string, error) {
	dec := json.NewDecoder(strings.NewReader(body))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("body is not JSON: %v", err)
	}
	// A second value or junk after the first would otherwise be ignored: a
	// producer could append anything and keep the key of the first value.
	if rest := strings.TrimLeft(body[dec.InputOffset():], " \t\r\n"); rest != "" {
		return "", fmt.Errorf("body is not JSON: data after the JSON value at byte %d", len(body)-len(rest))
	}
	for i, tok := range tokens {
		next, err := member(v, tok)
		if err != nil {
			return "", fmt.Errorf("body %s at %s", err, pointerPrefix(tokens[:i+1]))
		}
		if next == nil {
			return "", fmt.Errorf("body has a scalar at %s", pointerPrefix(tokens[:i]))
		}
		v = next
	}
	switch v[0] {
	case '"':
		if err := checkString(v); err != nil {
			return "", fmt.Errorf("value at %s %v", pointerPrefix(tokens), err)
		}
		var s string
		err := json.Unmarshal(v, &s)
		return s, err
	case 'n':
		return "", errors.New("value is null")
	case 't', 'f':
		// Two values for a whole stream of messages: all but the first of
		// each would be dropped as duplicates.
		return "", errors.New("value is a boolean, not a string or number")
	case '{', '[':
		// An object or array as a key would depend on the producer's member
		// order and spacing: two sends of one order could get different keys.
		return "", errors.New("value is an object or array, not a string or number")
	}
	// A number is its literal text, as the producer wrote it.
	return string(v), nil
}

// member returns the raw value of member tok of the object v, or of element
// tok of the array v; nil, nil if v is a scalar. The error completes "body
// ... at <pointer>".
func member(v json.RawMessage, tok string) (json.RawMessage, error) {
	if v[0] != '{' && v[0] != '[' {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	if _, err := dec.Token(); err != nil { // '{' or '['
		return nil, err
	}
	if v[0] == '[' {
		// RFC 6901's index is "0" or digits without a leading zero: Atoi
		// alone would also read "+1" and "-0".
		idx, err := strconv.Atoi(tok)
		if err != nil || tok[0] < '0' || tok[0] > '9' || (len(tok) > 1 && tok[0] == '0') {
			return nil, errors.New("has no element")
		}
		for i := 0; dec.More(); i++ {
			var elem json.RawMessage
			if err := dec.Decode(&elem); err != nil {
				return nil, err
			}
			if i == idx {
				return elem, nil
			}
		}
		return nil, errors.New("has no element")
	}
	var found json.RawMessage
	for dec.More() {
		start := dec.InputOffset()
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		// The raw name: what follows the previous token (a comma, white
		// space) up to the end of this one starts at its opening quote.
		raw := v[start:dec.InputOffset()]
		raw = raw[bytes.IndexByte(raw, '"'):]
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, err
		}
		if t.(string) != tok {
			continue
		}
		if err := checkString(raw); err != nil {
			return nil, fmt.Errorf("has a member whose name %v", err)
		}
		if found != nil {
			// encoding/json would take the last one: a producer could
			// make the key whichever it likes.
			return nil, fmt.Errorf("has a duplicate member %q", tok)
		}
		found = val
	}
	if found == nil {
		return nil, errors.New("has no member")
	}
	return found, nil
}

// checkString refuses a raw JSON string literal that encoding/json would
// decode lossily: invalid UTF-8, or a surrogate escape that is not half of a
// high-low pair. Both become U+FFFD, so distinct strings would compare equal.
// A valid pair ("\ud83d\ude00") is the character it encodes, like the
// character written as is.
func checkString(raw []byte) error {
	if !utf8.Valid(raw) {
		return errors.New("is not valid UTF-8")
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++ // the escaped character
		if raw[i] != 'u' {
			continue
		}
		r := hex4(raw[i+1:])
		i += 4
		switch {
		case utf16.IsSurrogate(r) && r < 0xdc00: // high: a low must follow
			if i+6 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
				if lo := hex4(raw[i+3:]); lo >= 0xdc00 && lo <= 0xdfff {
					i += 6
					continue
				}
			}
			return fmt.Errorf("has a lone surrogate escape \\u%04x", r)
		case utf16.IsSurrogate(r): // low without a high before it
			return fmt.Errorf("has a lone surrogate escape \\u%04x", r)
		}
	}
	return nil
}

// hex4 is the value of the 4 hex digits that begin b; the caller's input is
// valid JSON, where \u is always followed by 4 of them.
func hex4(b []byte) rune {
	n, _ := strconv.ParseUint(string(b[:4]), 16, 32)
	return rune(n)
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

// HashKey is what Config.HashKeys stores and shows instead of a key: the
// SHA-256 of its bytes, in lowercase hex (64 characters, whatever the
// key's length).
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}
