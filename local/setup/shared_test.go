package main

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The npm tools of a fresh clone come from one copy per machine: installed
// there, under a lock, only when that copy lacks them, and linked as .tools.
func TestFreshCloneSharesTheNpmTools(t *testing.T) {
	const shared = "/home/u/.cache/sqs-once/tools/dynalite-4.0.0+amplify-dynamodb-simulator-2.9.30"
	opts := Options{Pip: true, SharedTools: shared}
	mkdir := []string{"mkdir", "-p", "/home/u/.cache/sqs-once/tools"}
	link := []string{"ln", "-s", shared, ".tools"}
	lock := []string{"flock", shared + ".lock"}
	installDynalite := append(append([]string{}, lock...), "npm", "install", "--prefix", shared, "--no-audit", "--no-fund", "--save-exact", "dynalite@4.0.0")
	installLocal := append(append([]string{}, lock...), "npm", "install", "--prefix", shared, "--no-audit", "--no-fund", "--save-exact", "amplify-dynamodb-simulator@2.9.30")

	clone := equipped()
	clone.Tools, clone.Dynalite, clone.DynamoDBLocal = false, "", ""

	// The first clone on the machine installs into the shared copy.
	p := NewPlan(Test, clone, testPins, opts)
	if got, want := commands(p), [][]string{mkdir, installDynalite, installLocal, link}; !reflect.DeepEqual(got, want) {
		t.Errorf("first clone: commands\n got %q\nwant %q", got, want)
	}
	if len(p.Steps) != 1 || p.Steps[0].Note == "" {
		t.Errorf("first clone: one step, with npm's notes; got %+v", p.Steps)
	}

	// The next only links it: no npm.
	clone.SharedDynalite, clone.SharedDynamoDBLocal = "4.0.0", "2.9.30"
	p = NewPlan(Test, clone, testPins, opts)
	if got, want := commands(p), [][]string{mkdir, link}; !reflect.DeepEqual(got, want) {
		t.Errorf("copy there: commands\n got %q\nwant %q", got, want)
	}

	// A copy with an older DynamoDB Local gets the pinned one.
	clone.SharedDynamoDBLocal = "2.9.0"
	if got, want := commands(NewPlan(Test, clone, testPins, opts)), [][]string{mkdir, installLocal, link}; !reflect.DeepEqual(got, want) {
		t.Errorf("older copy: commands\n got %q\nwant %q", got, want)
	}

	// A clone that has .tools (its own directory, or the link) keeps it:
	// an install goes through it, as without the shared copy.
	own := equipped()
	own.Tools, own.Dynalite = true, "3.2.2"
	if got, want := commands(NewPlan(Test, own, testPins, opts)), [][]string{npmInstall}; !reflect.DeepEqual(got, want) {
		t.Errorf(".tools there: commands\n got %q\nwant %q", got, want)
	}

	// Without a shared copy (-shared-tools=false, no cache directory) a
	// clone installs into its own .tools.
	if got, want := commands(NewPlan(Test, clone, testPins, Options{Pip: true})), [][]string{npmInstall, npmInstallLocal}; !reflect.DeepEqual(got, want) {
		t.Errorf("no shared copy: commands\n got %q\nwant %q", got, want)
	}

	// The demo needs neither.
	if p := NewPlan(Demo, clone, testPins, opts); !p.Empty() {
		t.Errorf("demo: plan %+v, want nothing", p)
	}
}

// The run: a first clone installs into the shared copy (in the user's cache
// directory, here a temporary one) and links .tools to it; a second clone
// only links; both then find everything.
func TestRunSharesTheNpmToolsAcrossClones(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	shared := filepath.Join(os.Getenv("XDG_CACHE_HOME"), "sqs-once", "tools", "dynalite-4.0.0+amplify-dynamodb-simulator-2.9.30")
	tools := append(slices.Clone(everyTool), "mkdir", "ln")
	for i, wantNPM := range []bool{true, false} {
		m := newMachine(t, fullPython(), tools...)
		code, stdout, stderr := runSetup(t, m, "-for", "test", "-shared-tools=true")
		if code != 0 {
			t.Fatalf("clone %d: exit %d\nstdout:\n%s\nstderr:\n%s", i+1, code, stdout, stderr)
		}
		if got := strings.Contains(stderr, "+ npm install --prefix "+shared+" "); got != wantNPM {
			t.Errorf("clone %d: npm ran into the shared copy: %t, want %t\n%s", i+1, got, wantNPM, stderr)
		}
		if !strings.Contains(stderr, "+ ln -s "+shared+" .tools\n") || strings.Contains(stderr, "missing") {
			t.Errorf("clone %d: want .tools linked and nothing missing:\n%s", i+1, stderr)
		}
		if target, err := os.Readlink(filepath.Join(m.root, ".tools")); err != nil || target != shared {
			t.Errorf("clone %d: .tools links to %q (%v), want %q", i+1, target, err, shared)
		}
		if code, stdout, stderr := runSetup(t, m, "-for", "test", "-shared-tools=true"); code != 0 || stdout != "" || stderr != "" {
			t.Errorf("clone %d again: exit %d, stdout %q, stderr %q; want 0 and silence", i+1, code, stdout, stderr)
		}
	}
}
