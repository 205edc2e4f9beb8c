//go:build integration

package templatetest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/samstack"
)

const (
	tableStart = "<!-- params:start -->"
	tableEnd   = "<!-- params:end -->"
)

// parameterTable renders the configuration reference's parameter table from
// the template: one row per parameter in the order of the console's
// parameter groups.
func parameterTable(tmpl samstack.Template) string {
	byName := map[string]samstack.Parameter{}
	for _, p := range tmpl.Parameters() {
		byName[p.Name] = p
	}
	// Pipes would end the cell and <name> would be taken for an HTML tag.
	cell := strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace
	var b strings.Builder
	b.WriteString("| Parameter | Type | Default | Allowed | Description |\n")
	b.WriteString("|---|---|---|---|---|\n")
	iface := asMap(asMap(tmpl["Metadata"])["AWS::CloudFormation::Interface"])
	for _, g := range asSlice(iface["ParameterGroups"]) {
		for _, n := range asSlice(asMap(g)["Parameters"]) {
			p := byName[asString(n)]
			def := "(none)"
			if p.Default != nil {
				def = "`" + *p.Default + "`"
				if *p.Default == "" {
					def = "(empty)"
				}
			}
			var allowed string
			switch {
			case len(p.AllowedValues) > 0:
				allowed = "`" + strings.Join(p.AllowedValues, "`, `") + "`"
			case p.MinValue != nil && p.MaxValue != nil:
				allowed = num(*p.MinValue) + " to " + num(*p.MaxValue)
			case p.ConstraintDescription != "":
				allowed = p.ConstraintDescription
			}
			b.WriteString("| `" + p.Name + "` | " + p.Type + " | " + def + " | " + cell(strings.TrimSpace(allowed)) + " | " + cell(strings.TrimSpace(p.Description)) + " |\n")
		}
	}
	return b.String()
}

// TestDocsParameterTable keeps the configuration reference's parameter
// table what the template says: every parameter, its default, its limits
// and its description, and no other.
func TestDocsParameterTable(t *testing.T) {
	t.Parallel()
	const page = "docs/configuration.md"
	want := parameterTable(translatedTemplate(t))
	doc, err := os.ReadFile(filepath.Join(root(t), filepath.FromSlash(page)))
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, tableStart), strings.Index(s, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no %s ... %s region; it should hold:\n%s", page, tableStart, tableEnd, want)
	}
	got := strings.TrimSpace(s[i+len(tableStart) : j])
	if got != strings.TrimSpace(want) {
		t.Errorf("%s's parameter table differs from template.yaml; replace the region with:\n%s", page, want)
	}
}
