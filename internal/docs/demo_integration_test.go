//go:build integration

package docs

import (
	"bytes"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sqs-once/sqs-once/internal/local/demo"
)

// TestDemoFlagsAreDocumented: docs/demo.md's table of flags is exactly the
// flags cmd/sqs-once-local takes. (Under the integration tag: a hermetic
// test may not import internal/local.)
func TestDemoFlagsAreDocumented(t *testing.T) {
	t.Parallel()
	var usage bytes.Buffer
	if _, err := demo.ParseFlags([]string{"-h"}, &usage); !errors.Is(err, demo.ErrHelp) {
		t.Fatalf("ParseFlags(-h): %v, want ErrHelp", err)
	}
	flag := regexp.MustCompile(`(?m)^  -([a-z][a-z-]*)`)
	var takes []string
	for _, m := range flag.FindAllStringSubmatch(usage.String(), -1) {
		takes = append(takes, m[1])
	}
	var documented []string
	for _, row := range table(t, "docs/demo.md", "## Flags") {
		documented = append(documented, strings.TrimPrefix(name(row[0]), "-"))
	}
	slices.Sort(takes)
	slices.Sort(documented)
	if !slices.Equal(takes, documented) {
		t.Errorf("docs/demo.md's flags %v\nsqs-once-local takes %v", documented, takes)
	}
}
