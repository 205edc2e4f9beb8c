package main

import (
	"bytes"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

var testPins = Pins{
	Requirements:  Requirements,
	Python:        map[string]string{"moto": "5.2.1", "cfn-lint": "1.51.0", "aws-sam-translator": "1.110.0", "pyyaml": "6.0.3"},
	Dynalite:      "4.0.0",
	DynamoDBLocal: "2.9.30",
}

var pip = Options{Pip: true}

// equipped is a machine with everything: CI's image, this one.
func equipped() Facts {
	cmds := map[string]bool{}
	for _, c := range probedCommands {
		cmds[c] = true
	}
	return Facts{
		Root:     true,
		Commands: cmds,
		Python: &Python{Major: 3, Minor: 11, Ensurepip: true, Packages: map[string]string{
			"moto": "5.2.1", "cfn-lint": "1.51.0", "aws-sam-translator": "1.110.0", "pyyaml": "6.0.3",
		}},
		Dynalite:      "4.0.0",
		DynamoDBLocal: "2.9.30",
	}
}

// fresh is the machine of the issue: Go, make, git and python3 (with
// ensurepip, as python.org's builds and pyenv's have it), Node.js, and
// nothing else.
func fresh(root bool) Facts {
	return Facts{
		Root:     root,
		Commands: map[string]bool{"python3": true, "node": true, "npm": true, "apt-get": true, "sudo": true},
		Python:   &Python{Major: 3, Minor: 12, Ensurepip: true, Packages: map[string]string{}},
	}
}

// without is f with the commands hidden.
func without(f Facts, commands ...string) Facts {
	f.Commands = maps.Clone(f.Commands)
	for _, c := range commands {
		delete(f.Commands, c)
	}
	return f
}

var (
	aptUpdate       = []string{"apt-get", "update"}
	venvCreate      = []string{"python3", "-m", "venv", ".venv"}
	pipInstall      = []string{".venv/bin/python", "-m", "pip", "install", "-r", "requirements-dev.txt"}
	npmInstall      = []string{"npm", "install", "--prefix", ".tools", "--no-audit", "--no-fund", "--save-exact", "dynalite@4.0.0"}
	npmInstallLocal = []string{"npm", "install", "--prefix", ".tools", "--no-audit", "--no-fund", "--save-exact", "amplify-dynamodb-simulator@2.9.30"}
)

func aptInstall(pkgs ...string) []string {
	return append([]string{"apt-get", "install", "-y"}, pkgs...)
}

// commands flattens the plan's steps.
func commands(p Plan) [][]string {
	var out [][]string
	for _, s := range p.Steps {
		out = append(out, s.Cmds...)
	}
	return out
}

func manualLines(p Plan) []string {
	var out []string
	for _, m := range p.Manual {
		out = append(out, m.For+": "+m.Do)
	}
	return out
}

func TestNothingToDoWhereEverythingIs(t *testing.T) {
	for _, goal := range []Goal{Demo, Test} {
		for _, root := range []bool{true, false} {
			f := equipped()
			f.Root = root
			if p := NewPlan(goal, f, testPins, pip); !p.Empty() {
				t.Errorf("%s, root %t: plan %+v, want nothing", goal, root, p)
			}
		}
	}
	// The demo needs none of what only the tests use.
	f := without(equipped(), "cfn-lint", "aws", "spin", "gcc", "tmux", "redis-server", "postgres", "mariadbd", "java", "node", "npm")
	f.Python.Packages = map[string]string{"aws-sam-translator": "1.110.0", "pyyaml": "6.0.3"}
	f.Dynalite, f.DynamoDBLocal = "", ""
	if p := NewPlan(Demo, f, testPins, pip); !p.Empty() {
		t.Errorf("demo without the tests' tools: plan %+v, want nothing", p)
	}
}

func TestFreshMachineAsRootInstallsEverything(t *testing.T) {
	p := NewPlan(Test, fresh(true), testPins, pip)
	want := [][]string{aptUpdate, aptInstall("spin", "gcc", "tmux", "redis-server", "postgresql-15", "mariadb-server", "openjdk-17-jre-headless"), venvCreate, pipInstall, npmInstall, npmInstallLocal}
	if got := commands(p); !reflect.DeepEqual(got, want) {
		t.Errorf("commands\n got %q\nwant %q", got, want)
	}
	if len(p.Manual) != 0 {
		t.Errorf("as root nothing is left to the user; got %q", manualLines(p))
	}

	p = NewPlan(Demo, fresh(true), testPins, pip)
	if got, want := commands(p), [][]string{venvCreate, pipInstall}; !reflect.DeepEqual(got, want) {
		t.Errorf("demo: commands\n got %q\nwant %q", got, want)
	}
	if p.Steps[0].For != "moto_server, python3's samtranslator, python3's yaml (into .venv, from requirements-dev.txt)" {
		t.Errorf("demo: the step is for %q", p.Steps[0].For)
	}
}

func TestFreshMachineAsUserGivesTheAptLine(t *testing.T) {
	p := NewPlan(Test, fresh(false), testPins, pip)
	// pip and npm need no root: they run.
	if got, want := commands(p), [][]string{venvCreate, pipInstall, npmInstall, npmInstallLocal}; !reflect.DeepEqual(got, want) {
		t.Errorf("commands\n got %q\nwant %q", got, want)
	}
	if got, want := manualLines(p), []string{"spin, gcc, tmux, redis-server, postgres, mariadbd, java: sudo apt-get update && sudo apt-get install -y spin gcc tmux redis-server postgresql-15 mariadb-server openjdk-17-jre-headless"}; !reflect.DeepEqual(got, want) {
		t.Errorf("manual\n got %q\nwant %q", got, want)
	}

	noSudo := without(fresh(false), "sudo")
	if got := manualLines(NewPlan(Test, noSudo, testPins, pip)); len(got) != 1 || got[0] != "spin, gcc, tmux, redis-server, postgres, mariadbd, java: as root: apt-get update && apt-get install -y spin gcc tmux redis-server postgresql-15 mariadb-server openjdk-17-jre-headless" {
		t.Errorf("without sudo: manual %q", got)
	}
	noApt := without(fresh(true), "apt-get")
	if got := manualLines(NewPlan(Test, noApt, testPins, pip)); len(got) != 1 || got[0] != "spin, gcc, tmux, redis-server, postgres, mariadbd, java: install spin gcc tmux redis-server postgresql-15 mariadb-server openjdk-17-jre-headless with the system's package manager" {
		t.Errorf("without apt-get: manual %q", got)
	}
}

// Debian's and Ubuntu's python3 has no ensurepip until python3-venv is
// installed: apt-get comes first, and the venv waits for it.
func TestPythonWithoutEnsurepip(t *testing.T) {
	f := fresh(true)
	f.Python.Ensurepip = false
	p := NewPlan(Demo, f, testPins, pip)
	want := [][]string{aptUpdate, aptInstall("python3-venv"), venvCreate, pipInstall}
	if got := commands(p); !reflect.DeepEqual(got, want) {
		t.Errorf("as root: commands\n got %q\nwant %q", got, want)
	}

	f.Root = false
	p = NewPlan(Test, f, testPins, pip)
	if got, want := commands(p), [][]string{npmInstall, npmInstallLocal}; !reflect.DeepEqual(got, want) {
		t.Errorf("as a user: commands\n got %q\nwant %q (the venv waits for python3-venv)", got, want)
	}
	got := manualLines(p)
	if len(got) != 2 || got[0] != "python3's venv, spin, gcc, tmux, redis-server, postgres, mariadbd, java: sudo apt-get update && sudo apt-get install -y python3-venv spin gcc tmux redis-server postgresql-15 mariadb-server openjdk-17-jre-headless" ||
		!strings.HasSuffix(got[1], ": make test installs them once python3-venv is there") {
		t.Errorf("as a user: manual %q", got)
	}

	// An existing .venv needs no ensurepip: pip is in it.
	f.Venv = true
	if got, want := commands(NewPlan(Demo, f, testPins, pip)), [][]string{pipInstall}; !reflect.DeepEqual(got, want) {
		t.Errorf("with .venv: commands\n got %q\nwant %q", got, want)
	}
}

func TestNoPython(t *testing.T) {
	f := without(fresh(true), "python3")
	f.Python = nil
	p := NewPlan(Demo, f, testPins, pip)
	want := [][]string{aptUpdate, aptInstall("python3", "python3-venv"), venvCreate, pipInstall}
	if got := commands(p); !reflect.DeepEqual(got, want) {
		t.Errorf("commands\n got %q\nwant %q", got, want)
	}
	if !strings.HasPrefix(p.Steps[1].For, "moto_server, python3's samtranslator, python3's yaml") {
		t.Errorf("the venv step is for %q; without python3 it lacks every package", p.Steps[1].For)
	}
}

func TestOldPythonIsTheUsers(t *testing.T) {
	f := equipped()
	f.Python.Minor = 10
	if p := NewPlan(Demo, f, testPins, pip); !p.Empty() {
		t.Errorf("demo with python3 3.10: %+v, want nothing (only the tests read tomllib)", p)
	}
	p := NewPlan(Test, f, testPins, pip)
	if got := manualLines(p); len(got) != 1 || !strings.HasPrefix(got[0], "python3 3.10: install Python 3.11 or newer") || len(p.Steps) != 0 {
		t.Errorf("test with python3 3.10: %+v", p)
	}
}

func TestPythonToolsAtAnotherMajorVersion(t *testing.T) {
	f := equipped()
	f.Python.Packages["moto"] = "4.2.14"
	f.Python.Packages["cfn-lint"] = "1.3.0" // same major: kept
	p := NewPlan(Test, f, testPins, pip)
	if got, want := commands(p), [][]string{venvCreate, pipInstall}; !reflect.DeepEqual(got, want) {
		t.Errorf("commands\n got %q\nwant %q", got, want)
	}
	if want := "python3's moto 5.2.1 (found 4.2.14) (into .venv, from requirements-dev.txt)"; p.Steps[0].For != want {
		t.Errorf("step for %q, want %q", p.Steps[0].For, want)
	}
}

// CI's image has the Python tools; CI never installs them with pip.
func TestWithoutPipTheCommandIsTheUsers(t *testing.T) {
	f := without(equipped(), "moto_server")
	p := NewPlan(Test, f, testPins, Options{Pip: false})
	if len(p.Steps) != 0 {
		t.Errorf("steps %+v, want none", p.Steps)
	}
	want := []string{"moto_server: python3 -m venv .venv && .venv/bin/python -m pip install -r requirements-dev.txt"}
	if got := manualLines(p); !reflect.DeepEqual(got, want) {
		t.Errorf("manual\n got %q\nwant %q", got, want)
	}
}

func TestNodeAndDynalite(t *testing.T) {
	f := without(equipped(), "npm")
	f.Dynalite, f.DynamoDBLocal = "", ""
	p := NewPlan(Test, f, testPins, pip)
	if len(p.Steps) != 0 || len(p.Manual) != 1 || p.Manual[0].Do != NodeHint || !strings.Contains(p.Manual[0].For, "dynalite 4.0.0") || !strings.Contains(p.Manual[0].For, "amplify-dynamodb-simulator 2.9.30") {
		t.Errorf("without npm: %+v", p)
	}

	f = equipped()
	f.Dynalite = "3.2.2"
	p = NewPlan(Test, f, testPins, pip)
	if got, want := commands(p), [][]string{npmInstall}; !reflect.DeepEqual(got, want) || p.Steps[0].For != "dynalite 4.0.0 (into .tools), replacing 3.2.2" {
		t.Errorf("stale dynalite: %+v", p)
	}
	// npm 11 warns that classic-level's install script is not in
	// allowScripts: setup says a word on it before npm runs.
	if n := p.Steps[0].Note; !strings.Contains(n, "install script") || !strings.Contains(n, "allowScripts") || !strings.Contains(n, "nothing to do") {
		t.Errorf("the dynalite step's note is %q; want a word on npm's install-scripts warning", n)
	}
}

// Every tool setup can miss is named on one line of what it prints: the
// dry run's plan and the one message of what is left to the user.
func TestEachMissingToolIsNamedOnce(t *testing.T) {
	for _, root := range []bool{true, false} {
		f := fresh(root)
		f.Python.Ensurepip = false
		delete(f.Commands, "npm")
		var out bytes.Buffer
		NewPlan(Test, f, testPins, pip).Render(&out, true)
		lines := strings.Split(out.String(), "\n")
		for _, tool := range []string{"moto_server", "cfn-lint", "aws,", "samtranslator", "spin", "gcc", "tmux", "redis-server", "postgres", "mariadbd", "java", "npm", "python3's venv"} {
			n := 0
			for _, l := range lines {
				// Commands are indented deeper than what they install.
				if strings.Contains(l, tool) && !strings.HasPrefix(l, "    ") {
					n++
				}
			}
			if n != 1 {
				t.Errorf("root %t: %s is named on %d lines, want 1:\n%s", root, tool, n, out.String())
			}
		}
		if n := strings.Count(out.String(), "setup (make test): missing"); n > 1 {
			t.Errorf("root %t: %d messages for the user, want one:\n%s", root, n, out.String())
		}
	}
}

func TestRender(t *testing.T) {
	var out bytes.Buffer
	NewPlan(Test, fresh(false), testPins, pip).Render(&out, true)
	want := `setup (make test) would install:
  moto_server, cfn-lint, aws, python3's samtranslator, python3's yaml, python3's moto, python3's cfn-lint (into .venv, from requirements-dev.txt):
    python3 -m venv .venv
    .venv/bin/python -m pip install -r requirements-dev.txt
  dynalite 4.0.0 (into .tools):
    npm install --prefix .tools --no-audit --no-fund --save-exact dynalite@4.0.0
  DynamoDB Local (amplify-dynamodb-simulator 2.9.30, into .tools):
    npm install --prefix .tools --no-audit --no-fund --save-exact amplify-dynamodb-simulator@2.9.30
setup (make test): missing what only you can install; do this, then run make test again:
  spin, gcc, tmux, redis-server, postgres, mariadbd, java: sudo apt-get update && sudo apt-get install -y spin gcc tmux redis-server postgresql-15 mariadb-server openjdk-17-jre-headless
`
	if out.String() != want {
		t.Errorf("dry run:\n%s\nwant:\n%s", out.String(), want)
	}
	// Not a dry run: the steps announce themselves as they run; the message
	// is the same.
	out.Reset()
	NewPlan(Test, fresh(false), testPins, pip).Render(&out, false)
	if !strings.HasPrefix(want, "setup (make test) would install:") || !strings.HasSuffix(want, out.String()) || strings.Contains(out.String(), "would") {
		t.Errorf("run:\n%s", out.String())
	}
	out.Reset()
	NewPlan(Test, equipped(), testPins, pip).Render(&out, true)
	if out.Len() != 0 {
		t.Errorf("nothing to do, yet it says:\n%s", out.String())
	}
}

func TestShellLine(t *testing.T) {
	if got := shellLine([]string{"pip", "install", "-r", "/my dir/req.txt", "it's"}); got != `pip install -r '/my dir/req.txt' 'it'\''s'` {
		t.Errorf("shellLine = %s", got)
	}
}

// What NewPlan looks up in Facts, probe finds.
func TestProbeAsksWhatThePlanNeeds(t *testing.T) {
	for _, goal := range []Goal{Demo, Test} {
		cmds, dists := needs(goal)
		for _, c := range cmds {
			if !slices.Contains(probedCommands, c) {
				t.Errorf("%s needs command %s, which probe does not look for", goal, c)
			}
		}
		for _, d := range dists {
			if !slices.Contains(probedDists, d.Dist) {
				t.Errorf("%s needs %s, which probe does not ask python3 about", goal, d.Dist)
			}
		}
	}
	for _, c := range append(slices.Clone(aptTools), "postgres", "mariadbd", "java", "node", "npm", "apt-get", "sudo", "python3") {
		if !slices.Contains(probedCommands, c) {
			t.Errorf("the plan asks about %s, which probe does not look for", c)
		}
	}
}

// A machine with Node.js that lacks DynamoDB Local and java: npm installs
// the package into .tools, apt-get the Java runtime that runs it (as root;
// otherwise the one sudo line names it); a stale package is replaced.
func TestJavaAndDynamoDBLocal(t *testing.T) {
	f := without(equipped(), "java")
	f.DynamoDBLocal = ""
	p := NewPlan(Test, f, testPins, pip)
	if got, want := commands(p), [][]string{aptUpdate, aptInstall("openjdk-17-jre-headless"), npmInstallLocal}; !reflect.DeepEqual(got, want) || len(p.Manual) != 0 {
		t.Errorf("as root: commands\n got %q\nwant %q; manual %q", got, want, manualLines(p))
	}
	if got, want := p.Steps[0].For+" | "+p.Steps[1].For, "java | DynamoDB Local (amplify-dynamodb-simulator 2.9.30, into .tools)"; got != want {
		t.Errorf("steps for %q, want %q", got, want)
	}
	// npm's install is long and large: setup says so before it runs.
	if n := p.Steps[1].Note; !strings.Contains(n, "350 MB") || !strings.Contains(n, "DynamoDBLocal.jar") {
		t.Errorf("the DynamoDB Local step's note is %q; want a word on the install's size and what the tests use of it", n)
	}

	f.Root = false
	p = NewPlan(Test, f, testPins, pip)
	if got, want := commands(p), [][]string{npmInstallLocal}; !reflect.DeepEqual(got, want) {
		t.Errorf("as a user: commands\n got %q\nwant %q (npm needs no root)", got, want)
	}
	if got, want := manualLines(p), []string{"java: sudo apt-get update && sudo apt-get install -y openjdk-17-jre-headless"}; !reflect.DeepEqual(got, want) {
		t.Errorf("as a user: manual\n got %q\nwant %q", got, want)
	}

	f = equipped()
	f.DynamoDBLocal = "2.9.0"
	p = NewPlan(Test, f, testPins, pip)
	if got, want := commands(p), [][]string{npmInstallLocal}; !reflect.DeepEqual(got, want) || p.Steps[0].For != "DynamoDB Local (amplify-dynamodb-simulator 2.9.30, into .tools), replacing 2.9.0" {
		t.Errorf("stale DynamoDB Local: %+v", p)
	}
	// The demo needs none of it.
	if p := NewPlan(Demo, without(equipped(), "java"), testPins, pip); !p.Empty() {
		t.Errorf("demo without java: %+v, want nothing", p)
	}
}

// A machine without MariaDB: as root setup installs mariadb-server (the
// MySQL store's tests start its mariadbd); otherwise the one apt line
// names it; the demo needs none of it.
func TestMariaDB(t *testing.T) {
	f := without(equipped(), "mariadbd")
	p := NewPlan(Test, f, testPins, pip)
	if got, want := commands(p), [][]string{aptUpdate, aptInstall("mariadb-server")}; !reflect.DeepEqual(got, want) || len(p.Manual) != 0 || p.Steps[0].For != "mariadbd" {
		t.Errorf("as root: commands\n got %q\nwant %q; for %q; manual %q", got, want, p.Steps[0].For, manualLines(p))
	}
	f.Root = false
	p = NewPlan(Test, f, testPins, pip)
	if got, want := manualLines(p), []string{"mariadbd: sudo apt-get update && sudo apt-get install -y mariadb-server"}; len(p.Steps) != 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("as a user: steps %q, manual\n got %q\nwant %q", commands(p), got, want)
	}
	noApt := without(f, "apt-get", "sudo")
	if got, want := manualLines(NewPlan(Test, noApt, testPins, pip)), []string{"mariadbd: install mariadb-server with the system's package manager"}; !reflect.DeepEqual(got, want) {
		t.Errorf("without apt-get: manual\n got %q\nwant %q", got, want)
	}
	if p := NewPlan(Demo, without(equipped(), "mariadbd"), testPins, pip); !p.Empty() {
		t.Errorf("demo without mariadbd: %+v, want nothing", p)
	}
}
