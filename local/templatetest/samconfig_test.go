//go:build integration

package templatetest

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// samconfig reads samconfig.toml with Python's own TOML parser (Python 3.11
// or newer), the Python the SAM translator already needs.
func samconfig(t *testing.T) map[string]any {
	t.Helper()
	out, err := exec.Command("python3", "-c",
		"import json, sys, tomllib; json.dump(tomllib.load(open(sys.argv[1], 'rb')), sys.stdout)",
		filepath.Join(root(t), "samconfig.toml")).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("read samconfig.toml with python3's tomllib (needs Python 3.11 or newer): %v\n%s", err, stderr)
	}
	var cfg map[string]any
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestSamconfig(t *testing.T) {
	t.Parallel()
	cfg := samconfig(t)
	def := asMap(cfg["default"])
	get := func(cmd, key string) any { return asMap(asMap(def[cmd])["parameters"])[key] }

	if cfg["version"] != 0.1 {
		t.Errorf("version = %v, want 0.1", cfg["version"])
	}
	for _, c := range []struct {
		cmd, key string
		want     any
	}{
		{"global", "stack_name", "sqs-once"},
		{"build", "cached", true},
		{"build", "parallel", true},
		{"deploy", "capabilities", "CAPABILITY_IAM"},
		{"deploy", "confirm_changeset", true},
		{"deploy", "resolve_s3", true},
		// make package passes --s3-bucket (a bucket the Serverless
		// Application Repository can read); the SAM CLI refuses both.
		{"package", "resolve_s3", nil},
	} {
		if got := get(c.cmd, c.key); got != c.want {
			t.Errorf("default.%s.parameters.%s = %v, want %v", c.cmd, c.key, got, c.want)
		}
	}
	// Queue names are "<stack>-main" etc.; SQS allows 80 characters.
	if name := asString(get("global", "stack_name")); len(name) > 70 {
		t.Errorf("stack name %q is longer than the template allows (70)", name)
	}

	// Every override names a parameter, with a value the template accepts;
	// the shipped file spells out the defaults and nothing else.
	tmpl := translatedTemplate(t)
	defaults, err := tmpl.ParameterValues(nil)
	if err != nil {
		t.Fatal(err)
	}
	overrides := map[string]string{}
	for _, o := range asSlice(get("deploy", "parameter_overrides")) {
		k, v, ok := strings.Cut(asString(o), "=")
		if !ok || k == "" || v == "" {
			// The SAM CLI cannot pass an empty value this way.
			t.Errorf("parameter override %q is not Key=Value with a value", o)
			continue
		}
		overrides[k] = v
	}
	if len(overrides) == 0 {
		t.Fatal("no parameter_overrides")
	}
	if _, err := tmpl.ParameterValues(overrides); err != nil {
		t.Errorf("parameter_overrides rejected by the template: %v", err)
	}
	for k, v := range overrides {
		if d, ok := defaults[k]; ok && d != v {
			t.Errorf("parameter_overrides sets %s=%s but the template's default is %s", k, v, d)
		}
	}
}
