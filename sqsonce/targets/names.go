package targets

// The names of named executions (a Step Functions execution, a Lambda
// durable execution) derived from a Delivery's RecordKey.
//
// The mapping is part of the deployed contract: a name is what makes a
// second start of one key's execution fail, so it must be the same for a
// key in every process, on every redelivery, in every version. Changing
// it would start a key's execution again. It is:
//
//   - the key itself, when every character is in the service's readable
//     alphabet (below), it is 1 to the service's maximum long, and it does
//     not end like a hashed name ("-" and 32 lowercase hex digits);
//   - otherwise a readable prefix, "-", and the first 32 hex digits (128
//     bits) of the SHA-256 of the key: the prefix is the key with each run
//     of characters outside the alphabet replaced by one "_", cut to leave
//     room for the hash ("key" when nothing is left).
//
// A key used as it is never looks like a hashed name, and a hashed name
// hashes the whole key, so two keys share a name only if their hashes'
// 128-bit prefixes collide.
//
// The readable alphabets are ASCII only, narrower than the services allow:
//   - Step Functions (1 to 80 characters; none of whitespace, < > { } [ ],
//     ? *, " # % \ ^ | ~ ` $ & , ; : /, control characters U+0000-001F and
//     U+007F-009F): the printable ASCII characters except those. Other
//     Unicode characters are allowed by the service, but how it counts
//     their length and whether it compares them normalised is not stated,
//     and CloudWatch Logs wants [0-9A-Za-z_-]: they go to the hashed form.
//   - Lambda durable functions (DurableExecutionName: 1 to 64 of
//     [A-Za-z0-9_-]): that alphabet.

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Name lengths of the services and of the hash suffix.
const (
	stateMachineNameMax = 80
	durableNameMax      = 64
	nameHashHex         = 32 // hex digits of the SHA-256 kept: 128 bits
	nameHashSuffix      = 1 + nameHashHex
	emptyNamePrefix     = "key"
)

// stateMachineExecutionName is the Step Functions execution name of key
// (a Delivery's RecordKey); see the mapping above.
func stateMachineExecutionName(key string) string {
	return executionName(key, stateMachineNameMax, stateMachineNameChar)
}

// durableExecutionName is the Lambda DurableExecutionName of key (a
// Delivery's RecordKey); see the mapping above.
func durableExecutionName(key string) string {
	return executionName(key, durableNameMax, durableNameChar)
}

// stateMachineNameChar reports whether r may appear in a readable Step
// Functions execution name.
func stateMachineNameChar(r rune) bool {
	if r <= ' ' || r >= 0x7f {
		return false // whitespace, control characters, non-ASCII
	}
	return !strings.ContainsRune(`<>{}[]?*"#%\^|~`+"`"+`$&,;:/`, r)
}

// durableNameChar reports whether r may appear in a durable execution
// name: [A-Za-z0-9_-].
func durableNameChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'
}

func executionName(key string, maxLen int, allowed func(rune) bool) string {
	if len(key) >= 1 && len(key) <= maxLen && !looksHashed(key) && all(key, allowed) {
		return key
	}
	var prefix strings.Builder
	limit := maxLen - nameHashSuffix
	replaced := false
	for _, r := range key {
		if prefix.Len() >= limit {
			break
		}
		switch {
		case allowed(r):
			prefix.WriteRune(r) // ASCII: one byte
			replaced = false
		case !replaced:
			prefix.WriteByte('_')
			replaced = true
		}
	}
	p := prefix.String()
	if p == "" {
		p = emptyNamePrefix
	}
	sum := sha256.Sum256([]byte(key))
	return p + "-" + hex.EncodeToString(sum[:])[:nameHashHex]
}

func all(s string, allowed func(rune) bool) bool {
	for _, r := range s {
		if !allowed(r) {
			return false
		}
	}
	return true
}

// looksHashed reports whether s ends like a hashed name: "-" and 32
// lowercase hex digits. Such a key is hashed itself, so that no key used
// as it is can equal another key's hashed name.
func looksHashed(s string) bool {
	if len(s) < nameHashSuffix || s[len(s)-nameHashSuffix] != '-' {
		return false
	}
	for _, c := range s[len(s)-nameHashHex:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// ExecutionName is the name of the execution a target of s starts for a
// record's key (sqsonce.Delivery.RecordKey: the key, or its
// sqsonce.HashKey under Config.HashKeys), and true; "" and false for a kind
// that starts no named execution.
func (s Spec) ExecutionName(recordKey string) (string, bool) {
	switch s.Kind {
	case States:
		return stateMachineExecutionName(recordKey), true
	case Durable:
		return durableExecutionName(recordKey), true
	}
	return "", false
}
