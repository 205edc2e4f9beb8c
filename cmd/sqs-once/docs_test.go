package main

import (
	"bytes"
	"context"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/internal/ops"
	"github.com/sqs-once/sqs-once/internal/docs"
)

// The CLI's part of the configuration reference is checked here, in the
// CLI's module: the product module's docs tests cannot import the CLI.

const reference = "docs/configuration.md"

var inlineCode = regexp.MustCompile("`[^`]*`")

// cliHelp runs sqs-once with args and returns what it printed.
func cliHelp(t testing.TB, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := ops.Main(context.Background(), args, ops.IO{Stdout: &out, Stderr: &errOut}); code != ops.ExitOK {
		t.Fatalf("sqs-once %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
	}
	return out.String()
}

var helpFlag = regexp.MustCompile(`^\s+(?:-\w, )?--([a-z][a-z-]*)`)

// helpSection returns the names in a section ("Flags:", "Global Flags:",
// "Available Commands:") of a cobra help text.
func helpSection(help, section string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(help, "\n") {
		switch {
		case l == section:
			in = true
		case in && strings.TrimSpace(l) == "":
			return out
		case in && section == "Available Commands:":
			out = append(out, strings.Fields(l)[0])
		case in:
			if m := helpFlag.FindStringSubmatch(l); m != nil && m[1] != "help" {
				out = append(out, m[1])
			}
		}
	}
	return out
}

// TestConfigurationListsEveryCLIFlag: the reference's table of the CLI's
// flags names every flag of every command, each with the commands that
// take it, and nothing the CLI does not take.
func TestConfigurationListsEveryCLIFlag(t *testing.T) {
	t.Parallel()
	// What the CLI takes: command -> flags; "" is the root alone, "*" every
	// command (the persistent flags).
	root := cliHelp(t, "--help")
	took := map[string][]string{}
	for _, cmd := range helpSection(root, "Available Commands:") {
		if cmd == "help" || cmd == "completion" {
			continue
		}
		help := cliHelp(t, cmd, "--help")
		took[cmd] = helpSection(help, "Flags:")
		took["*"] = helpSection(help, "Global Flags:")
	}
	for _, f := range helpSection(root, "Flags:") {
		if !slices.Contains(took["*"], f) {
			took[""] = append(took[""], f)
		}
	}
	documented := map[string][]string{}
	for _, row := range docs.Table(t, reference, "## The sqs-once CLI") {
		flag := strings.TrimPrefix(docs.Name(row[0]), "--")
		switch cmds := row[1]; {
		case cmds == "every command":
			documented["*"] = append(documented["*"], flag)
		case strings.HasPrefix(cmds, "`sqs-once`"):
			documented[""] = append(documented[""], flag)
		default:
			for _, c := range inlineCode.FindAllString(cmds, -1) {
				documented[strings.Trim(c, "`")] = append(documented[strings.Trim(c, "`")], flag)
			}
		}
	}
	all := map[string]bool{}
	for k := range took {
		all[k] = true
	}
	for k := range documented {
		all[k] = true
	}
	for _, cmd := range slices.Sorted(maps.Keys(all)) {
		got, want := slices.Sorted(slices.Values(took[cmd])), slices.Sorted(slices.Values(documented[cmd]))
		if !slices.Equal(got, want) {
			label := map[string]string{"*": "every command", "": "sqs-once alone"}[cmd]
			if label == "" {
				label = cmd
			}
			t.Errorf("%s: flags of %s: documented %v, the CLI takes %v", reference, label, want, got)
		}
	}
}
