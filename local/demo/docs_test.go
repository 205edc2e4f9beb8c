package demo_test

import (
	"bytes"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sqs-once/sqs-once/internal/docs"
	"github.com/sqs-once/sqs-once/local/demo"
)

// TestDemoFlagsAreDocumented: docs/demo.md's table of flags is exactly the
// flags local/cmd/sqs-once-local takes.
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
	for _, row := range docs.Table(t, "docs/demo.md", "## Flags") {
		documented = append(documented, strings.TrimPrefix(docs.Name(row[0]), "-"))
	}
	slices.Sort(takes)
	slices.Sort(documented)
	if !slices.Equal(takes, documented) {
		t.Errorf("docs/demo.md's flags %v\nsqs-once-local takes %v", documented, takes)
	}
}
