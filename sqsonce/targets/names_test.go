package targets

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// validStateMachineName applies Step Functions' documented rule for an
// execution name, written out apart from the mapping under test: 1 to 80
// characters, none of whitespace, brackets, wildcards, the listed special
// characters, control characters (U+0000-001F, U+007F-009F, U+FFFE-FFFF)
// or surrogates, and valid UTF-8.
func validStateMachineName(name string) bool {
	if !utf8.ValidString(name) || name == "" || utf8.RuneCountInString(name) > 80 {
		return false
	}
	for _, r := range name {
		switch {
		case r <= 0x20, r >= 0x7f && r <= 0xa0, r == 0x1680, r >= 0x2000 && r <= 0x200a,
			r == 0x2028, r == 0x2029, r == 0x202f, r == 0x205f, r == 0x3000, r == 0x85,
			r >= 0xd800 && r <= 0xdfff, r == 0xfffe, r == 0xffff:
			return false
		case strings.ContainsRune("<>{}[]?*\"#%\\^|~`$&,;:/", r):
			return false
		}
	}
	return true
}

// durableNameRule is DurableExecutionName's documented constraint: length
// 1 to 64, pattern [a-zA-Z0-9-_]+.
var durableNameRule = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestExecutionNames(t *testing.T) {
	long := strings.Repeat("order-", 20) // 120 characters
	for _, tc := range []struct {
		key, states, durable string
	}{
		// Keys that fit both alphabets are their own names.
		{"order-42", "order-42", "order-42"},
		{"A_b-9", "A_b-9", "A_b-9"},
		// Characters Step Functions allows and durable functions do not.
		{"order.42@eu", "order.42@eu", "order_42_eu-"},
		{"tenant=7+order=9", "tenant=7+order=9", "tenant_7_order_9-"},
		// Characters neither allows: each run becomes one "_".
		{"tenant/42/order 7", "tenant_42_order_7-", "tenant_42_order_7-"},
		{"a::b", "a_b-", "a_b-"},
		// Unicode is hashed, its ASCII kept.
		{"café-Ω", "caf_-_-", "caf_-_-"},
		{"日本", "_-", "_-"},
		// Empty and nothing readable.
		{"", "key-", "key-"},
		// A key shaped like a hashed name is hashed itself.
		{"x-0123456789abcdef0123456789abcdef", "x-0123456789abcdef0123456789abcdef-", "x-0123456789abcdef0123456789abc-"},
		// Too long: the prefix is cut to leave room for the hash.
		{long, long[:80-33] + "-", long[:64-33] + "-"},
	} {
		for _, svc := range []struct {
			name  string
			fn    func(string) string
			want  string
			valid func(string) bool
		}{
			{"states", stateMachineExecutionName, tc.states, validStateMachineName},
			{"durable", durableExecutionName, tc.durable, durableNameRule.MatchString},
		} {
			got := svc.fn(tc.key)
			if !svc.valid(got) {
				t.Errorf("%s(%q) = %q: not a valid name", svc.name, tc.key, got)
			}
			if strings.HasSuffix(svc.want, "-") {
				// Hashed: the readable prefix, then 32 hex digits.
				if !strings.HasPrefix(got, svc.want) || len(got) != len(svc.want)+32 || !looksHashed(got) {
					t.Errorf("%s(%q) = %q, want %q and 32 hex digits", svc.name, tc.key, got, svc.want)
				}
			} else if got != svc.want {
				t.Errorf("%s(%q) = %q, want %q", svc.name, tc.key, got, svc.want)
			}
			if again := svc.fn(tc.key); again != got {
				t.Errorf("%s(%q) = %q, then %q", svc.name, tc.key, got, again)
			}
		}
	}
}

// TestExecutionNamesKeepTheirHash pins the mapping: a name is the
// deployed contract (a change starts every key's execution again).
func TestExecutionNamesKeepTheirHash(t *testing.T) {
	// The hash is the SHA-256 of the key's bytes (printf 'tenant/42' | sha256sum), cut to 32 hex digits.
	for key, want := range map[string][2]string{
		"tenant/42": {"tenant_42-cfeec1e83cc4c080fe9f8aeedc33e8b5", "tenant_42-cfeec1e83cc4c080fe9f8aeedc33e8b5"},
	} {
		if got := stateMachineExecutionName(key); got != want[0] {
			t.Errorf("stateMachineExecutionName(%q) = %q, want %q", key, got, want[0])
		}
		if got := durableExecutionName(key); got != want[1] {
			t.Errorf("durableExecutionName(%q) = %q, want %q", key, got, want[1])
		}
	}
}

// TestExecutionNamesTellKeysApart: keys that differ only in a character
// the alphabet lacks, or in what a truncation cuts, get distinct names.
func TestExecutionNamesTellKeysApart(t *testing.T) {
	long := strings.Repeat("k", 100)
	keys := []string{
		"a/b", "a:b", "a b", "a\tb", "a_b", "a//b", "aéb", "aèb",
		long + "1", long + "2", long,
		"x-0123456789abcdef0123456789abcdef",
		stateMachineExecutionName("a/b"), // a hashed name as a key
	}
	for _, svc := range []struct {
		name string
		fn   func(string) string
	}{{"states", stateMachineExecutionName}, {"durable", durableExecutionName}} {
		seen := map[string]string{}
		for _, k := range keys {
			n := svc.fn(k)
			if other, ok := seen[n]; ok {
				t.Errorf("%s: keys %q and %q both map to %q", svc.name, other, k, n)
			}
			seen[n] = k
		}
	}
}

// FuzzExecutionNames: for any key, both names are valid by the services'
// documented rules, the same on every call, the key itself when it fits,
// and two distinct keys never share a name.
func FuzzExecutionNames(f *testing.F) {
	for _, seed := range [][2]string{
		{"order-42", "order-43"},
		{"a/b", "a:b"},
		{"", "key"},
		{"café", "cafe"},
		{strings.Repeat("x", 81), strings.Repeat("x", 80)},
		{"x-0123456789abcdef0123456789abcdef", "x"},
		{"\x00\xff", "\u0085"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, svc := range []struct {
			name  string
			fn    func(string) string
			max   int
			fits  func(rune) bool
			valid func(string) bool
		}{
			{"states", stateMachineExecutionName, 80, stateMachineNameChar, validStateMachineName},
			{"durable", durableExecutionName, 64, durableNameChar, durableNameRule.MatchString},
		} {
			na, nb := svc.fn(a), svc.fn(b)
			for _, c := range [][2]string{{a, na}, {b, nb}} {
				if !svc.valid(c[1]) {
					t.Fatalf("%s(%q) = %q: not a valid name", svc.name, c[0], c[1])
				}
				if again := svc.fn(c[0]); again != c[1] {
					t.Fatalf("%s(%q) = %q, then %q", svc.name, c[0], c[1], again)
				}
				fits := c[0] != "" && len(c[0]) <= svc.max && !looksHashed(c[0]) && all(c[0], svc.fits)
				if fits != (c[1] == c[0]) {
					t.Fatalf("%s(%q) = %q: the key fits: %v", svc.name, c[0], c[1], fits)
				}
			}
			if a != b && na == nb {
				t.Fatalf("%s: keys %q and %q both map to %q", svc.name, a, b, na)
			}
		}
	})
}

func TestSpecExecutionName(t *testing.T) {
	sm := Spec{Kind: States, Dest: "arn:aws:states:us-east-1:123456789012:stateMachine:orders"}
	if n, ok := sm.ExecutionName("tenant/42"); !ok || n != stateMachineExecutionName("tenant/42") {
		t.Errorf("states: %q, %v", n, ok)
	}
	if n, ok := (Spec{Kind: SQS, Dest: "https://sqs.us-east-1.amazonaws.com/1/q"}).ExecutionName("k"); ok || n != "" {
		t.Errorf("sqs: %q, %v", n, ok)
	}
}
