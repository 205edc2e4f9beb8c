//go:build integration

package templatetest

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/samstack"
	"github.com/sqs-once/sqs-once/internal/envconfig"
)

// envFile returns events/env.json's variables for each function.
func envFile(t *testing.T) map[string]map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root(t), "events", "env.json"))
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]map[string]string
	if err := json.Unmarshal(raw, &all); err != nil {
		t.Fatal(err)
	}
	return all
}

// TestEnvFileMatchesTemplate: `sam local invoke --env-vars` only sets
// variables the template declares, so events/env.json must name exactly
// those, with values the binaries accept.
func TestEnvFileMatchesTemplate(t *testing.T) {
	t.Parallel()
	tmpl := translatedTemplate(t)
	all := envFile(t)
	for fn, load := range loaders {
		e, ok := all[fn]
		if !ok {
			t.Errorf("env.json has no %s", fn)
			continue
		}
		vars := samstack.AsMap(samstack.AsMap(tmpl.Resources()[fn].Properties["Environment"])["Variables"])
		if want := slices.Sorted(maps.Keys(vars)); !slices.Equal(slices.Sorted(maps.Keys(e)), want) {
			t.Errorf("env.json %s sets %v, the template declares %v", fn, slices.Sorted(maps.Keys(e)), want)
		}
		if err := load(envconfig.Map(e)); err != nil {
			t.Errorf("env.json %s: %v", fn, err)
		}
	}
}
