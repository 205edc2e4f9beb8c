//go:build integration

package templatetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/internal/local/cfnlint"
)

// pinScript writes template.yaml (its argument) as JSON with some
// parameters pinned, one file per entry of the JSON object on its standard
// input ({file: {parameter: value}}): each value becomes the parameter's
// Default and its only AllowedValue, so cfn-lint, which weighs every
// outcome of every condition its parameters allow, checks the stack those
// values build (and that the values meet the parameter's own constraints).
const pinScript = `
import copy, json, sys, yaml

class Loader(yaml.SafeLoader):
    pass

def intrinsic(loader, suffix, node):
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if suffix in ("Ref", "Condition"):
        return {suffix: value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {"Fn::" + suffix: value}

Loader.add_multi_constructor("!", intrinsic)
Loader.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str)
source = yaml.load(open(sys.argv[1], encoding="utf-8"), Loader=Loader)
for file, values in json.load(sys.stdin).items():
    template = copy.deepcopy(source)
    for name, value in values.items():
        p = template["Parameters"][name]
        p["Default"] = value
        p["AllowedValues"] = [value]
    with open(file, "w") as f:
        json.dump(template, f, indent=1)
`

// lintCombinations are the parameter sets cfn-lint checks: every
// combination of the components, the queue type and which queues are yours
// that the template's Rules accept, and the install cases.
func lintCombinations(t *testing.T) map[string]map[string]string {
	t.Helper()
	tmpl := translatedTemplate(t)
	out := map[string]map[string]string{}
	for _, components := range []string{"all", "processor", "replayer"} {
		for _, queueType := range []string{"standard", "fifo"} {
			suffix := ""
			if queueType == "fifo" {
				suffix = ".fifo"
			}
			for _, existing := range []struct{ main, dlq bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
				p := map[string]string{"Components": components, "QueueType": queueType}
				if existing.main {
					p["ExistingQueueArn"] = "arn:aws:sqs:us-east-1:123456789012:orders" + suffix
				}
				if existing.dlq {
					p["ExistingDeadLetterQueueArn"] = "arn:aws:sqs:us-east-1:123456789012:orders-dlq" + suffix
				}
				if _, err := tmpl.ParameterValues(p); err != nil {
					continue // refused by a Rule: CloudFormation creates nothing
				}
				out[fmt.Sprintf("%s %s main:%v dlq:%v", components, queueType, existing.main, existing.dlq)] = p
			}
		}
	}
	for _, c := range installCases {
		out["case "+c.name] = c.params
	}
	return out
}

// pin writes template.yaml pinned to each combination, in one Python
// process (parsing the template once; a process per combination cost
// thirty Python starts), and returns the files as cfn-lint templates named
// by their combination and parameters, sorted by name.
func pin(t *testing.T, combinations map[string]map[string]string) []cfnlint.Template {
	t.Helper()
	dir := t.TempDir()
	names := slices.Sorted(maps.Keys(combinations))
	files := map[string]map[string]string{}
	var out []cfnlint.Template
	for i, name := range names {
		params := combinations[name]
		if params == nil {
			params = map[string]string{}
		}
		raw, err := json.Marshal(params)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, fmt.Sprintf("combination-%02d.json", i+1))
		files[file] = params
		// W1028 ("Fn::If branch not reachable") is what pinning a
		// parameter causes by construction.
		out = append(out, cfnlint.Template{Name: fmt.Sprintf("%s %s", name, raw), Path: file, Args: []string{"--ignore-checks", "W1028"}})
	}
	req, err := json.Marshal(files)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(testContext(t, 2*time.Minute), "python3", "-c", pinScript, templatePath(t))
	cmd.Stdin = bytes.NewReader(req)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pin template.yaml to %d combinations: %v\n%s", len(files), err, out)
	}
	return out
}

// linter is the package's cfn-lint, with the verdicts of earlier runs
// (internal/local/cfnlint): one cfn-lint --version per test binary.
var linter = sync.OnceValues(func() (*cfnlint.Linter, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return cfnlint.New(ctx)
})

// cfnLint lints templates through the package's linter; each one not
// clean is an error naming it. A template found clean in an earlier run,
// with the same bytes, cfn-lint and flags, is not linted again.
func cfnLint(t *testing.T, templates ...cfnlint.Template) {
	t.Helper()
	l, err := linter()
	if err != nil {
		t.Fatal(err)
	}
	// cfn-lint's checks of some thirty templates are minutes of CPU; on a
	// busy two-core machine four processes over them outlasted 10 minutes
	// (the Makefile gives this package's run 30).
	verdicts, err := l.Lint(testContext(t, 20*time.Minute), templates)
	if err != nil {
		t.Fatal(err)
	}
	cached := 0
	for _, v := range verdicts {
		if !v.Clean {
			t.Errorf("cfn-lint (%s):\n%s", l.Version(), v.Report)
		}
		if v.Cached {
			cached++
		}
		if v.KeepErr != nil {
			t.Logf("cfn-lint: %s is clean, but the cache did not keep it: %v", v.Template.Name, v.KeepErr)
		}
	}
	t.Logf("%s: %d templates, %d linted, %d clean in an earlier run (cache: %s)", l.Version(), len(verdicts), len(verdicts)-cached, cached, cacheNote(l))
}

// cacheNote says where the verdicts are kept, or how to keep them.
func cacheNote(l *cfnlint.Linter) string {
	if l.CacheDir() == "" {
		return "off, " + cfnlint.NoCacheEnv + " is set"
	}
	return l.CacheDir()
}

// TestCfnLintEveryCombination runs cfn-lint on template.yaml as it is
// (every check on) and pinned to each combination of lintCombinations:
// each must be clean.
func TestCfnLintEveryCombination(t *testing.T) {
	t.Parallel()
	templates := append([]cfnlint.Template{{Name: "template.yaml", Path: templatePath(t)}}, pin(t, lintCombinations(t))...)
	cfnLint(t, templates...)
}
