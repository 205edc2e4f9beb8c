package docs

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// templateParameters returns the names of template.yaml's parameters, read
// from its text: the keys indented by two spaces under the top-level
// "Parameters:" (a YAML parser would need a module this one does not have,
// and the translated template needs python; local/templatetest checks
// the parameters themselves).
func templateParameters(t testing.TB) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	in := false
	key := regexp.MustCompile(`^  ([A-Za-z0-9]+):\s*$`)
	for _, l := range strings.Split(Read(t, "template.yaml"), "\n") {
		switch {
		case l == "Parameters:":
			in = true
		case in && l != "" && !strings.HasPrefix(l, " ") && !strings.HasPrefix(l, "#"):
			return out
		case in:
			if m := key.FindStringSubmatch(l); m != nil {
				out[m[1]] = true
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("template.yaml: no parameters found under Parameters:")
	}
	return out
}

// templateVersion is the application's SemanticVersion in template.yaml.
func templateVersion(t testing.TB) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^    SemanticVersion: (\S+)$`).FindStringSubmatch(Read(t, "template.yaml"))
	if m == nil {
		t.Fatal("template.yaml has no SemanticVersion under AWS::ServerlessRepo::Application")
	}
	return m[1]
}

// docPages are the pages that state the current version or tell a reader
// what to type: the README and docs/ (the changelog names every version).
func docPages(t testing.TB) []string {
	t.Helper()
	out := []string{"README.md"}
	docs, err := filepath.Glob(filepath.Join(Root(t), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		out = append(out, "docs/"+filepath.Base(d))
	}
	return out
}

var versionMention = regexp.MustCompile("(?:SemanticVersion`?:? |--semantic-version |[Vv]ersion |sqs-once )`?(\\d+\\.\\d+\\.\\d+)")

// TestEveryVersionIsTheTemplates: a version the docs give (a SAR
// command's --semantic-version, a nested application's SemanticVersion,
// "version 0.6.0") is the template's SemanticVersion, so no page tells a
// reader to install an old release, and the README's status is current.
func TestEveryVersionIsTheTemplates(t *testing.T) {
	t.Parallel()
	want := templateVersion(t)
	for _, page := range docPages(t) {
		for i, l := range strings.Split(Read(t, page), "\n") {
			for _, m := range versionMention.FindAllStringSubmatch(l, -1) {
				if m[1] != want {
					t.Errorf("%s:%d: %q names version %s; template.yaml's SemanticVersion is %s", page, i+1, m[0], m[1], want)
				}
			}
		}
	}
	if !strings.Contains(Read(t, "README.md"), "version "+want) {
		t.Errorf("README.md does not say it is at version %s", want)
	}
}

var override = regexp.MustCompile(`^(?:Name=)?([A-Za-z][A-Za-z0-9]*)[=,]`)

// TestParameterOverridesNameParameters: every parameter a command in the
// docs overrides (sam deploy --parameter-overrides Name=value, the SAR
// CLI's Name=...,Value=...) is one the template has.
func TestParameterOverridesNameParameters(t *testing.T) {
	t.Parallel()
	params := templateParameters(t)
	for _, page := range append(docPages(t), "examples/orders/README.md") {
		for _, block := range codeBlocks(Read(t, page)) {
			// One command per logical line: join the continued ones.
			for _, cmd := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
				_, rest, ok := strings.Cut(cmd, "--parameter-overrides")
				if !ok {
					continue
				}
				rest, _, _ = strings.Cut(rest, "#")
				for _, tok := range strings.Fields(rest) {
					if strings.HasPrefix(tok, "--") {
						break
					}
					m := override.FindStringSubmatch(tok)
					if m == nil {
						continue
					}
					if !params[m[1]] {
						t.Errorf("%s: %q overrides %s, which is not a parameter of template.yaml", page, strings.TrimSpace(cmd), m[1])
					}
				}
			}
		}
	}
}

// TestEverySampleEventIsDocumented: deploy.md's sam local invoke section
// lists every event of events/.
func TestEverySampleEventIsDocumented(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(Root(t), "events", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	deploy := Read(t, "docs/deploy.md")
	for _, f := range files {
		ev := filepath.Base(f)
		if ev != "env.json" && !strings.Contains(deploy, "| `"+ev+"` |") {
			t.Errorf("docs/deploy.md's table of sample events has no row for events/%s", ev)
		}
	}
}
