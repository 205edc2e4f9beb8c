// Package suggest finds, for a name that is not one of the known ones (a
// misspelt template parameter, redrive reason or flag value), the known
// name that was most likely meant, so that a refusal can say "did you mean
// ProcessorTimeout?". It is shared by every place that refuses such a name
// (the CLI's redrive --reason, samstack's template parameters, the
// try-out's), so that they all suggest alike.
package suggest

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxEdits is the most edits a name may be from a known one for that one
// to be suggested: two typos. Further than that, a suggestion is a guess.
const MaxEdits = 2

// Closest is the known name nearest to name by edit distance (Levenshtein,
// in characters, case ignored: a name that differs only in case is the
// nearest of all), and whether it is near enough to suggest: at most
// MaxEdits edits, and at most a third of the known name's length, so that
// a short name is not "corrected" into an unrelated one. A tie goes to the
// name first in sorted order. A name that is itself known is not
// suggested.
func Closest(name string, known []string) (string, bool) {
	if slices.Contains(known, name) {
		return "", false
	}
	best, bestDist := "", MaxEdits+1
	for _, k := range slices.Sorted(slices.Values(known)) {
		d := Distance(strings.ToLower(name), strings.ToLower(k))
		if d < bestDist && 3*d <= utf8.RuneCountInString(k) {
			best, bestDist = k, d
		}
	}
	return best, best != ""
}

// Distance is the Levenshtein distance between a and b: the fewest
// characters inserted, deleted or replaced to turn one into the other.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
