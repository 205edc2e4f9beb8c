//go:build integration

package templatetest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// pinScript writes template.yaml as JSON with some parameters pinned: each
// given value becomes the parameter's Default and its only AllowedValue, so
// cfn-lint, which weighs every outcome of every condition its parameters
// allow, checks the stack those values build (and that the values meet the
// parameter's own constraints).
const pinScript = `
import json, sys, yaml

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
template = yaml.load(open(sys.argv[1], encoding="utf-8"), Loader=Loader)
for name, value in json.loads(sys.argv[2]).items():
    p = template["Parameters"][name]
    p["Default"] = value
    p["AllowedValues"] = [value]
json.dump(template, open(sys.argv[3], "w"), indent=1)
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

// TestCfnLintEveryCombination runs cfn-lint on template.yaml as it is and
// pinned to each combination of lintCombinations: each must be clean.
func TestCfnLintEveryCombination(t *testing.T) {
	t.Parallel()
	lint, err := exec.LookPath("cfn-lint")
	if err != nil {
		t.Fatal("cfn-lint is not on PATH; install it: pip install cfn-lint")
	}
	combinations := lintCombinations(t)
	key, err := lintKey(templatePath(t), lint, combinations)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := linted.Load(key); ok {
		t.Logf("cfn-lint: this template and these %d combinations were clean earlier in this process (go test -count)", len(combinations))
		return
	}
	dir := t.TempDir()
	files := []string{templatePath(t)}
	names := map[string]string{templatePath(t): "template.yaml"}
	i := 0
	for name, params := range combinations {
		if params == nil {
			params = map[string]string{}
		}
		raw, err := json.Marshal(params)
		if err != nil {
			t.Fatal(err)
		}
		i++
		file := filepath.Join(dir, fmt.Sprintf("combination-%02d.json", i))
		cmd := exec.CommandContext(testContext(t, time.Minute), "python3", "-c", pinScript, templatePath(t), string(raw), file)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("pin %s: %v\n%s", name, err, out)
		}
		files = append(files, file)
		names[file] = fmt.Sprintf("%s %s", name, raw)
	}
	// template.yaml as it is, every check on; the pinned copies without
	// W1028 ("Fn::If branch not reachable"), which pinning a parameter
	// causes by construction. Four runs at a time: cfn-lint's start-up
	// dominates.
	runs := [][]string{{templatePath(t)}}
	const chunks = 4
	for k := range chunks {
		var chunk []string
		for n := 1 + k; n < len(files); n += chunks {
			chunk = append(chunk, files[n])
		}
		if len(chunk) > 0 {
			runs = append(runs, append([]string{"--ignore-checks", "W1028", "--"}, chunk...))
		}
	}
	runs[0] = append([]string{"--"}, runs[0]...)
	type result struct {
		out []byte
		err error
	}
	results := make([]chan result, len(runs))
	for k, args := range runs {
		results[k] = make(chan result, 1)
		go func() {
			cmd := exec.CommandContext(testContext(t, 10*time.Minute), lint, append([]string{"--format", "parseable"}, args...)...)
			cmd.Dir = dir // not the repository: a ./cfnlint there would shadow the package
			out, err := cmd.CombinedOutput()
			results[k] <- result{out, err}
		}()
	}
	for _, ch := range results {
		r := <-ch
		if r.err == nil && len(strings.TrimSpace(string(r.out))) == 0 {
			continue
		}
		var report []string
		for _, line := range strings.Split(strings.TrimSpace(string(r.out)), "\n") {
			for file, name := range names {
				if strings.HasPrefix(line, file) {
					line = name + ": " + strings.TrimPrefix(line, file)
				}
			}
			report = append(report, line)
		}
		t.Errorf("cfn-lint: %v\n%s", r.err, strings.Join(report, "\n"))
	}
	t.Logf("cfn-lint on template.yaml and %d pinned combinations", len(files)-1)
	if !t.Failed() {
		linted.Store(key, true)
	}
}

// linted holds the lintKey of each clean TestCfnLintEveryCombination in this
// process. cfn-lint's verdict depends only on the files and the cfn-lint it
// runs, so a repeat of the test (go test -count=5) with the same ones is
// answered from here: the tool's runs, four CPU-bound Python processes
// over some thirty templates, took minutes on a busy two-core machine and
// were most of the package's time. A failure is never remembered.
var linted sync.Map

// lintKey names what TestCfnLintEveryCombination's verdict depends on: the
// template's bytes, the cfn-lint executable's path and bytes, and the
// combinations.
func lintKey(template, lint string, combinations map[string]map[string]string) (string, error) {
	h := sha256.New()
	for _, f := range []string{template, lint} {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
	}
	c, err := json.Marshal(combinations) // map keys sorted: a stable encoding
	if err != nil {
		return "", err
	}
	h.Write(c)
	return hex.EncodeToString(h.Sum(nil)), nil
}
