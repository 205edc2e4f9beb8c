package demo

import (
	"strconv"
	"strings"
)

// count writes n and noun, the noun in the plural unless n is 1: "1 message",
// "2 messages", "3 extra copies". Only the last word is inflected.
func count(n int, noun string) string {
	return strconv.Itoa(n) + " " + plural(n, noun)
}

// plural is noun for n things.
func plural(n int, noun string) string {
	if n == 1 {
		return noun
	}
	head, last := "", noun
	if i := strings.LastIndexByte(noun, ' '); i >= 0 {
		head, last = noun[:i+1], noun[i+1:]
	}
	switch {
	case len(last) > 1 && last[len(last)-1] == 'y' && !strings.ContainsRune("aeiou", rune(last[len(last)-2])):
		return head + last[:len(last)-1] + "ies"
	case strings.HasSuffix(last, "s"), strings.HasSuffix(last, "sh"), strings.HasSuffix(last, "ch"):
		return head + last + "es"
	}
	return head + last + "s"
}

// verb is the present-tense verb for n subjects: one for 1, many otherwise
// ("has"/"have", "was"/"were", "fails"/"fail").
func verb(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
