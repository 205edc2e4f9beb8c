package docs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sqs-once/sqs-once/internal/local/proc"
)

// Root is the repository's root, from whichever module a test runs in
// (the product, local/, cmd/sqs-once/).
func Root(t testing.TB) string {
	t.Helper()
	dir, err := proc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// Read returns a file of the repository by its slash-separated path.
func Read(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Root(t), filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Prose is a Markdown text with its fenced code blocks blanked (their lines
// kept, so line numbers still hold): links and headings inside code are
// not links and headings.
func Prose(md string) string {
	lines := strings.Split(md, "\n")
	in := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			in = !in
			lines[i] = ""
			continue
		}
		if in {
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}

// Table returns the rows of the first table under the heading named
// section in page (a slash-separated path from the repository's root),
// each a slice of its cells with the backquotes kept.
func Table(t testing.TB, page, section string) [][]string {
	t.Helper()
	lines := strings.Split(Prose(Read(t, page)), "\n")
	i := slices.Index(lines, section)
	if i < 0 {
		t.Fatalf("%s has no heading %q", page, section)
	}
	var rows [][]string
	for _, l := range lines[i+1:] {
		if strings.HasPrefix(l, "#") {
			break
		}
		if !strings.HasPrefix(l, "|") {
			if len(rows) > 0 {
				break
			}
			continue
		}
		l = strings.ReplaceAll(l, `\|`, "\x00")
		var cells []string
		for _, c := range strings.Split(strings.Trim(l, "|"), "|") {
			cells = append(cells, strings.TrimSpace(strings.ReplaceAll(c, "\x00", "|")))
		}
		rows = append(rows, cells)
	}
	if len(rows) < 3 {
		t.Fatalf("%s: no table under %q", page, section)
	}
	return rows[2:] // the header and its rule
}

// Name is a table's first cell without its backquotes and placeholder:
// "`--max N`" is "--max".
func Name(cell string) string {
	f := strings.Fields(strings.Trim(cell, "`"))
	if len(f) == 0 {
		return ""
	}
	return strings.Trim(f[0], "`")
}

// CodeBlock returns the one fenced code block of page (a slash-separated
// path from the repository's root) whose info string is lang and whose
// text holds marker: the commands or template a test runs are then the
// ones a reader copies.
func CodeBlock(t testing.TB, page, lang, marker string) string {
	t.Helper()
	var found, block []string
	in, blockLang := false, ""
	for line := range strings.Lines(Read(t, page)) {
		line = strings.TrimSuffix(line, "\n")
		switch {
		case !in && strings.HasPrefix(line, "```"):
			in, blockLang, block = true, strings.TrimSpace(strings.TrimPrefix(line, "```")), nil
		case in && strings.TrimSpace(line) == "```":
			in = false
			if text := strings.Join(block, "\n") + "\n"; blockLang == lang && strings.Contains(text, marker) {
				found = append(found, text)
			}
		case in:
			block = append(block, line)
		}
	}
	if in {
		t.Fatalf("%s: a code block is not closed", page)
	}
	if len(found) != 1 {
		t.Fatalf("%s has %d ```%s blocks holding %q, want 1", page, len(found), lang, marker)
	}
	return found[0]
}
