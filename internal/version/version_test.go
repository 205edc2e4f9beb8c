package version_test

import (
	"bufio"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sqs-once/sqs-once/internal/version"
)

// semver is the form SemanticVersion takes (the Serverless Application
// Repository's rule, as TestServerlessRepoMetadata checks it).
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$`)

// TestOneVersion: the release the binaries report is the template's
// SemanticVersion and the newest CHANGELOG.md entry, and the changelog's
// entries go from newest to oldest.
func TestOneVersion(t *testing.T) {
	t.Parallel()
	if !semver.MatchString(version.Version) {
		t.Fatalf("version.Version %q is not MAJOR.MINOR.PATCH", version.Version)
	}
	if got := templateVersion(t, "../../template.yaml"); got != version.Version {
		t.Errorf("template.yaml's SemanticVersion is %s, version.Version %s: raise both, with a CHANGELOG.md entry", got, version.Version)
	}
	entries := changelogVersions(t, "../../CHANGELOG.md")
	if len(entries) == 0 {
		t.Fatal(`CHANGELOG.md has no entry ("## MAJOR.MINOR.PATCH - YYYY-MM-DD")`)
	}
	if entries[0] != version.Version {
		t.Errorf("CHANGELOG.md's newest entry is %s, version.Version %s", entries[0], version.Version)
	}
	for i := 1; i < len(entries); i++ {
		if !older(entries[i], entries[i-1]) {
			t.Errorf("CHANGELOG.md: %s comes after %s; entries go from newest to oldest, each once", entries[i], entries[i-1])
		}
	}
}

// templateVersion reads SemanticVersion from the template's Metadata,
// AWS::ServerlessRepo::Application, by indentation: the template's YAML
// needs CloudFormation's tags to be decoded whole, and this test needs no
// tool. It fails on a second SemanticVersion anywhere in the file.
func templateVersion(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	var section, app string
	for line := range strings.Lines(string(raw)) {
		line = strings.TrimRight(line, "\r\n")
		text := strings.TrimSpace(line)
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		switch indent := len(line) - len(strings.TrimLeft(line, " ")); {
		case indent == 0:
			section, app = text, ""
		case indent == 2:
			app = text
		}
		value, ok := strings.CutPrefix(text, "SemanticVersion:")
		if !ok {
			continue
		}
		if section != "Metadata:" || app != "AWS::ServerlessRepo::Application:" {
			t.Errorf("%s: SemanticVersion outside Metadata, AWS::ServerlessRepo::Application: %q", path, line)
			continue
		}
		found = append(found, strings.Trim(strings.TrimSpace(value), `"'`))
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d SemanticVersions in AWS::ServerlessRepo::Application (%v), want one", path, len(found), found)
	}
	return found[0]
}

// changelogVersions are the versions of CHANGELOG.md's entries, in order:
// the level-2 headings that start with a version.
func changelogVersions(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entry := regexp.MustCompile(`^## \d`)
	heading := regexp.MustCompile(`^## (\S+) - \d{4}-\d{2}-\d{2}$`)
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !entry.MatchString(line) {
			continue
		}
		m := heading.FindStringSubmatch(line)
		if m == nil || !semver.MatchString(m[1]) {
			t.Errorf("%s: entry heading %q, want \"## MAJOR.MINOR.PATCH - YYYY-MM-DD\"", path, line)
			continue
		}
		out = append(out, m[1])
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// older reports whether semantic version a comes before b.
func older(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := range 3 {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			return x < y
		}
	}
	return false
}
