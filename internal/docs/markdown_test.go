package docs

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// pages lists the Markdown files whose links must resolve: the README, the
// changelog, docs/, and every README under examples/, internal/, cmd/,
// local/ and sqsonce/.
func pages(t testing.TB) []string {
	t.Helper()
	out := []string{"README.md", "CHANGELOG.md"}
	docs, err := filepath.Glob(filepath.Join(Root(t), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		out = append(out, "docs/"+filepath.Base(d))
	}
	for _, dir := range []string{"examples", "internal", "cmd", "local", "sqsonce"} {
		err := fs.WalkDir(os.DirFS(Root(t)), dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
				return fs.SkipDir
			}
			if !d.IsDir() && d.Name() == "README.md" {
				out = append(out, p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// codeBlocks returns the contents of a Markdown text's fenced code blocks.
func codeBlocks(md string) []string {
	var out []string
	var cur []string
	in := false
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			if in {
				out = append(out, strings.Join(cur, "\n"))
				cur = nil
			}
			in = !in
			continue
		}
		if in {
			cur = append(cur, l)
		}
	}
	return out
}

var (
	inlineCode = regexp.MustCompile("`[^`]*`")
	// A link's target: [text](target) or [text](target "title").
	link    = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	heading = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
)

// anchors returns the fragment each heading of md gets on GitHub: lower
// case, punctuation other than '-' and '_' dropped, spaces made '-', and a
// repeated one numbered (-1, -2, ...).
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(Prose(md), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

func TestAnchorsAreGitHubs(t *testing.T) {
	t.Parallel()
	md := "# sqs-once\n## The documented duplicate window: `-crash N`\n## A skeptical run: `-chaos light|heavy`\n" +
		"## Status and versioning\n## Status and versioning\n```sh\n# not a heading\n```\n## Stability before 1.0\n"
	got := anchors(md)
	for _, want := range []string{"sqs-once", "the-documented-duplicate-window--crash-n", "a-skeptical-run--chaos-lightheavy",
		"status-and-versioning", "status-and-versioning-1", "stability-before-10"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a comment in a code block was taken for a heading")
	}
}

// TestReadmeIsAFrontDoor: the README says what sqs-once is and how to start
// within one screenful or so; the rest is in docs/.
func TestReadmeIsAFrontDoor(t *testing.T) {
	t.Parallel()
	const most = 300
	readme := Read(t, "README.md")
	if n := strings.Count(readme, "\n"); n > most {
		t.Errorf("README.md has %d lines, more than %d: move the detail into docs/ and link it", n, most)
	}
	// The first two commands a reader meets are the two that need no
	// set-up beyond the prerequisites.
	blocks := codeBlocks(readme)
	if len(blocks) == 0 {
		t.Fatal("README.md has no code block")
	}
	var cmds []string
	for _, l := range strings.Split(blocks[0], "\n") {
		if f := strings.Fields(l); len(f) >= 2 {
			cmds = append(cmds, f[0]+" "+f[1])
		}
	}
	if !slices.Equal(cmds, []string{"make demo", "make test"}) {
		t.Errorf("README.md's first commands are %q, want make demo, then make test", cmds)
	}
}

// TestEveryRelativeLinkResolves: every link to a file of the repository
// names one that exists, and every #fragment a heading of its page.
func TestEveryRelativeLinkResolves(t *testing.T) {
	t.Parallel()
	for _, page := range pages(t) {
		text := Read(t, page)
		lines := strings.Split(Prose(text), "\n")
		for i, l := range lines {
			l = inlineCode.ReplaceAllString(l, "")
			for _, m := range link.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				where := fmt.Sprintf("%s:%d: %s", page, i+1, target)
				file, frag, _ := strings.Cut(target, "#")
				dest := page
				if file != "" {
					dest = path.Join(path.Dir(page), file)
					if strings.HasPrefix(dest, "../") || path.IsAbs(file) {
						t.Errorf("%s: leaves the repository", where)
						continue
					}
					if _, err := os.Stat(filepath.Join(Root(t), filepath.FromSlash(dest))); err != nil {
						t.Errorf("%s: no such file or directory %s", where, dest)
						continue
					}
				}
				if frag == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s: a fragment on a file that is not Markdown", where)
					continue
				}
				if !anchors(Read(t, dest))[frag] {
					t.Errorf("%s: %s has no heading #%s", where, dest, frag)
				}
			}
		}
	}
}

// TestEveryPageSaysWhoItIsFor: each page of docs/ opens, under its title,
// with a paragraph (not a list, a table or code) that says who it is for.
func TestEveryPageSaysWhoItIsFor(t *testing.T) {
	t.Parallel()
	docs, err := filepath.Glob(filepath.Join(Root(t), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		page := "docs/" + filepath.Base(d)
		lines := strings.Split(Read(t, page), "\n")
		if len(lines) < 3 || !strings.HasPrefix(lines[0], "# ") || lines[1] != "" {
			t.Errorf("%s: does not start with a title and a blank line", page)
			continue
		}
		first := lines[2]
		if first == "" || strings.ContainsAny(first[:1], "#|-*`>") || regexp.MustCompile(`^\d+\.`).MatchString(first) {
			t.Errorf("%s: the first thing under the title is %q, not a paragraph saying who the page is for", page, first)
		}
	}
}
