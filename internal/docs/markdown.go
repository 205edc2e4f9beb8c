package docs

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// module is the product module's path: the repository's root is the
// directory whose go.mod declares it, from whichever module a test runs
// in (the product, local/, cmd/sqs-once/).
const module = "github.com/sqs-once/sqs-once"

// Root is the repository's root: the nearest directory up from the test's
// working directory whose go.mod declares the product module.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if declares(filepath.Join(dir, "go.mod")) {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatalf("no go.mod of %s above the working directory", module)
		}
		dir = up
	}
}

// declares reports whether the go.mod at path declares the product module.
func declares(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) == 2 && fields[0] == "module" {
			return fields[1] == module
		}
	}
	return false
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
