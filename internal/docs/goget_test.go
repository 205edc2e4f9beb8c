package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// goGetLine is a `go get` of this module or one of its packages, with any
// version.
var goGetLine = regexp.MustCompile(`go get (github\.com/sqs-once/sqs-once\S*)`)

// goGets are the ways the pages and examples say to get the library: its
// package, which is what a user imports (go get resolves the module,
// github.com/sqs-once/sqs-once, from it), and the stores that are modules
// of their own, by their module path (docs/development.md, "Modules"). No
// version is tagged, so none is named (@latest would read as if one were).
func goGets() []string {
	return []string{
		"github.com/sqs-once/sqs-once/sqsonce",
		"github.com/sqs-once/sqs-once/sqsonce/store/pgstore",
		"github.com/sqs-once/sqs-once/sqsonce/store/redisstore",
		"github.com/sqs-once/sqs-once/sqsonce/store/mysqlstore",
	}
}

// TestOneGoGetPathEverywhere: every `go get` of the library in the pages
// and the examples' go.mod comments names the library's package or a
// store's module, without a version, and the pages that say it say that
// no version is tagged yet.
func TestOneGoGetPathEverywhere(t *testing.T) {
	files := pages(t)
	mods, err := fs.Glob(os.DirFS(Root(t)), "examples/*/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, mods...)
	found := 0
	for _, f := range files {
		text := Read(t, f)
		for _, m := range goGetLine.FindAllStringSubmatch(text, -1) {
			found++
			if got := strings.TrimRight(m[1], "`.,)"); !slices.Contains(goGets(), got) {
				t.Errorf("%s says go get %s; want one of %s (one path per module everywhere)", f, got, strings.Join(goGets(), ", "))
			}
		}
		lower := strings.ToLower(strings.Join(strings.Fields(text), " "))
		if goGetLine.MatchString(text) && !strings.Contains(lower, "no version is tagged yet") && !strings.Contains(lower, "no tagged version yet") {
			t.Errorf("%s says go get without saying that no version is tagged yet", filepath.ToSlash(f))
		}
	}
	if found < 3 {
		t.Errorf("found %d go get lines; want the README's, the library page's and the examples'", found)
	}
}
