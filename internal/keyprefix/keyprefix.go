// Package keyprefix is the rule for a record id's prefix (sqsonce's
// Config.KeyPrefix, KEY_PREFIX), in one place for the processor, which
// refuses a bad one, and the operator's CLI, which takes one from its user.
package keyprefix

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxBytes is the longest prefix, in bytes.
const MaxBytes = 128

// Check refuses a prefix that could make two keys' records collide
// ("a#b" + "#" + "c" is the record of prefix "a", key "b#c") or that a
// person reading the table or the logs could not tell apart from another
// (white space, control and format characters, invalid UTF-8), and an
// empty one.
func Check(p string) error {
	if p == "" {
		return errors.New("empty")
	}
	if len(p) > MaxBytes {
		return fmt.Errorf("%q is %d bytes, more than %d", p, len(p), MaxBytes)
	}
	if !utf8.ValidString(p) {
		return fmt.Errorf("%q is not valid UTF-8", p)
	}
	for _, r := range p {
		switch {
		case r == '#':
			return fmt.Errorf("%q contains '#', the separator of prefix and key", p)
		case unicode.IsSpace(r), unicode.IsControl(r), unicode.Is(unicode.Cf, r):
			return fmt.Errorf("%q contains %U, a space, control or invisible character", p, r)
		}
	}
	return nil
}
