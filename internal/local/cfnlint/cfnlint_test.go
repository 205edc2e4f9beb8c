package cfnlint

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeEnv, when set, makes the test binary act as cfn-lint: the tests run
// it as the Linter's executable. Its value is a file each run appends its
// arguments to.
const fakeEnv = "CFNLINT_TEST_FAKE_LOG"

func TestMain(m *testing.M) {
	if log := os.Getenv(fakeEnv); log != "" {
		os.Exit(fakeCfnLint(log, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeCfnLint answers as cfn-lint --format json does, by what each
// template holds: "BAD" a finding in that file, "NOFILE" a finding that
// names no file (cfn-lint's configuration errors), "CRASH" a traceback and
// no JSON, "WARN" a warning on standard error.
func fakeCfnLint(log string, args []string) int {
	f, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return 99
	}
	fmt.Fprintln(f, strings.Join(args, " "))
	f.Close()
	if slices.Equal(args, []string{"--version"}) {
		fmt.Println("cfn-lint 0.0.fake")
		return 0
	}
	dash := slices.Index(args, "--")
	if dash < 0 || !slices.Equal(args[:2], []string{"--format", "json"}) {
		return 98
	}
	type finding struct {
		Filename *string
		Level    string
		Message  string
		Location map[string]map[string]int
		Rule     map[string]string
	}
	findings := []finding{}
	code := 0
	for _, file := range args[dash+1:] {
		data, err := os.ReadFile(file)
		if err != nil {
			return 97
		}
		text := string(data)
		if strings.Contains(text, "CRASH") {
			fmt.Fprintln(os.Stderr, "Traceback (most recent call last):\nKeyError: 'x'")
			return 1
		}
		if strings.Contains(text, "WARN") {
			fmt.Fprintln(os.Stderr, "DeprecationWarning: something")
		}
		loc := map[string]map[string]int{"Start": {"LineNumber": 3, "ColumnNumber": 7}}
		if strings.Contains(text, "BAD") {
			findings = append(findings, finding{Filename: &file, Level: "Error", Message: "'abc' is not of type 'integer'", Location: loc, Rule: map[string]string{"Id": "E3012"}})
			code |= 2
		}
		if strings.Contains(text, "NOFILE") {
			findings = append(findings, finding{Level: "Error", Message: "could not be processed", Location: loc, Rule: map[string]string{"Id": "E0003"}})
			code |= 2
		}
	}
	out, _ := json.Marshal(findings)
	fmt.Println(string(out))
	return code
}

// fake is a Linter whose cfn-lint is this test binary, with its cache in a
// directory of the test's (none when cached is false), and the file that
// logs its runs.
func fake(t *testing.T, cached bool) (*Linter, string) {
	t.Helper()
	log := filepath.Join(t.TempDir(), "runs")
	t.Setenv(fakeEnv, log)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := ""
	if cached {
		dir = filepath.Join(t.TempDir(), "cache")
	}
	l, err := newLinter(context.Background(), exe, dir)
	if err != nil {
		t.Fatal(err)
	}
	if l.Version() != "cfn-lint 0.0.fake" {
		t.Fatalf("version %q", l.Version())
	}
	return l, log
}

// runs are the cfn-lint runs logged so far, but the --version one.
func runs(t *testing.T, log string) []string {
	t.Helper()
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line != "--version" {
			out = append(out, line)
		}
	}
	return out
}

func write(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func lint(t *testing.T, l *Linter, templates ...Template) []Verdict {
	t.Helper()
	v, err := l.Lint(context.Background(), templates)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != len(templates) {
		t.Fatalf("%d verdicts for %d templates", len(v), len(templates))
	}
	return v
}

// TestCleanVerdictIsKept: a clean template is linted once; a second Lint
// with nothing changed finds it in the cache and runs no cfn-lint, and a
// change to its bytes, its flags or its extension lints it again.
func TestCleanVerdictIsKept(t *testing.T) {
	l, log := fake(t, true)
	dir := t.TempDir()
	a := Template{Name: "a", Path: write(t, dir, "a.yaml", "Resources: {}\n")}
	if v := lint(t, l, a); !v[0].Clean || v[0].Cached || v[0].KeepErr != nil || v[0].Report != "" {
		t.Fatalf("first lint: %+v", v[0])
	}
	v := lint(t, l, a)
	if !v[0].Clean || !v[0].Cached {
		t.Errorf("second lint: %+v, want clean from the cache", v[0])
	}
	if _, err := os.Stat(v[0].Entry); err != nil {
		t.Errorf("cache entry: %v", err)
	}
	if got := runs(t, log); len(got) != 1 {
		t.Errorf("cfn-lint ran %d times, want once: %q", len(got), got)
	}

	for _, changed := range []Template{
		{Name: "a", Path: write(t, dir, "a.yaml", "Resources: {} # changed\n")},
		{Name: "a", Path: a.Path, Args: []string{"--ignore-checks", "W1028"}},
		{Name: "a", Path: write(t, dir, "a.json", "Resources: {} # changed\n")},
	} {
		before := len(runs(t, log))
		if v := lint(t, l, changed); !v[0].Clean || v[0].Cached {
			t.Errorf("%+v: %+v, want linted again", changed, v[0])
		}
		if got := runs(t, log); len(got) != before+1 {
			t.Errorf("%+v: cfn-lint ran %d times, want %d", changed, len(got), before+1)
		}
	}
}

// TestFindingsNameTheirTemplate: templates with the same flags are linted
// in one cfn-lint run (Processes 1), templates with others in a run of
// their own; a finding is reported under its template's name only, and a
// failing template is never kept: it is linted again next time.
func TestFindingsNameTheirTemplate(t *testing.T) {
	l, log := fake(t, true)
	l.Processes = 1
	dir := t.TempDir()
	ignore := []string{"--ignore-checks", "W1028"}
	templates := []Template{
		{Name: "template.yaml", Path: write(t, dir, "template.yaml", "ok")},
		{Name: "all standard", Path: write(t, dir, "c1.json", "ok 1"), Args: ignore},
		{Name: "processor fifo", Path: write(t, dir, "c2.json", "BAD"), Args: ignore},
		{Name: "replayer fifo", Path: write(t, dir, "c3.json", "ok 3"), Args: ignore},
	}
	v := lint(t, l, templates...)
	if got := runs(t, log); len(got) != 2 {
		t.Errorf("cfn-lint ran %d times, want twice (one per set of flags): %q", len(got), got)
	}
	for i, want := range []bool{true, true, false, true} {
		if v[i].Clean != want || v[i].Template.Name != templates[i].Name {
			t.Errorf("verdict %d: %+v, want clean %v", i, v[i], want)
		}
	}
	if want := "processor fifo: 3:7: E3012 Error 'abc' is not of type 'integer'"; v[2].Report != want {
		t.Errorf("report %q, want %q", v[2].Report, want)
	}
	if got := Failures(v); len(got) != 1 || got[0] != v[2].Report {
		t.Errorf("Failures = %q", got)
	}
	if _, err := os.Stat(v[2].Entry); err == nil {
		t.Error("a failing verdict was kept")
	}

	before := len(runs(t, log))
	v = lint(t, l, templates...)
	if !v[0].Cached || !v[1].Cached || v[2].Cached || v[2].Clean || !v[3].Cached {
		t.Errorf("second lint: %+v", v)
	}
	if got := runs(t, log); len(got) != before+1 || !strings.HasSuffix(got[len(got)-1], "-- "+templates[2].Path) {
		t.Errorf("second lint ran %q, want only the failing template", got[before:])
	}
}

// TestProcessesSplitsAFlagSet: Processes 2 lints five templates with the
// same flags in two runs, of three and two, and every verdict comes back.
func TestProcessesSplitsAFlagSet(t *testing.T) {
	l, log := fake(t, true)
	l.Processes = 2
	dir := t.TempDir()
	var templates []Template
	for i := range 5 {
		text := "ok"
		if i == 3 {
			text = "BAD"
		}
		templates = append(templates, Template{Name: fmt.Sprint("c", i), Path: write(t, dir, fmt.Sprintf("c%d.json", i), fmt.Sprint(text, i))})
	}
	v := lint(t, l, templates...)
	got := runs(t, log)
	if len(got) != 2 || strings.Count(got[0], ".json")+strings.Count(got[1], ".json") != 5 {
		t.Errorf("runs %q, want two over the five templates", got)
	}
	for i, v := range v {
		if v.Clean != (i != 3) || v.Template.Name != templates[i].Name {
			t.Errorf("verdict %d: %+v", i, v)
		}
	}
}

// TestUnattributedFailureFailsEveryTemplate: when cfn-lint fails without
// naming a file (a crash, a configuration error) or writes to its standard
// error, no template of that run is clean, and none is kept.
func TestUnattributedFailureFailsEveryTemplate(t *testing.T) {
	for _, cause := range []string{"CRASH", "NOFILE", "WARN"} {
		t.Run(cause, func(t *testing.T) {
			l, _ := fake(t, true)
			l.Processes = 1
			dir := t.TempDir()
			v := lint(t, l,
				Template{Name: "one", Path: write(t, dir, "one.yaml", "ok")},
				Template{Name: "two", Path: write(t, dir, "two.yaml", cause)},
			)
			for _, v := range v {
				if v.Clean || !strings.HasPrefix(v.Report, v.Template.Name+": ") {
					t.Errorf("%+v, want a failure that names its template", v)
				}
				if _, err := os.Stat(v.Entry); err == nil {
					t.Errorf("%s: a failing verdict was kept", v.Template.Name)
				}
			}
		})
	}
}

// TestNoCache: with the cache off every Lint runs cfn-lint and nothing is
// written.
func TestNoCache(t *testing.T) {
	l, log := fake(t, false)
	a := Template{Name: "a", Path: write(t, t.TempDir(), "a.yaml", "ok")}
	for range 2 {
		if v := lint(t, l, a); !v[0].Clean || v[0].Cached || v[0].Entry != "" {
			t.Errorf("%+v", v[0])
		}
	}
	if got := runs(t, log); len(got) != 2 {
		t.Errorf("cfn-lint ran %d times, want twice", len(got))
	}
}

// TestCacheDirFromEnvironment: the cache's directory is CacheDirEnv's,
// else under XDG_CACHE_HOME, else under ~/.cache; NoCacheEnv turns it off.
func TestCacheDirFromEnvironment(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, c := range []struct {
		noCache, dir, xdg, want string
	}{
		{want: filepath.Join(home, ".cache", "sqs-once", "cfn-lint")},
		{xdg: "/xdg", want: "/xdg/sqs-once/cfn-lint"},
		{xdg: "relative", want: filepath.Join(home, ".cache", "sqs-once", "cfn-lint")},
		{dir: "/elsewhere", xdg: "/xdg", want: "/elsewhere"},
		{noCache: "0", dir: "/elsewhere", want: "/elsewhere"},
		{noCache: "1", dir: "/elsewhere", want: ""},
	} {
		t.Setenv(NoCacheEnv, c.noCache)
		t.Setenv(CacheDirEnv, c.dir)
		t.Setenv("XDG_CACHE_HOME", c.xdg)
		got, err := cacheDir()
		if err != nil || got != c.want {
			t.Errorf("%+v: %q, %v", c, got, err)
		}
	}
}

// TestKeyCoversRegionsAndUserConfig: the region cfn-lint reads from the
// environment (AWS_REGION, else AWS_DEFAULT_REGION, else us-east-1) and
// the user's ~/.cfnlintrc are part of every key; the same region however
// named is one key.
func TestKeyCoversRegionsAndUserConfig(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	unset := func(name string) {
		t.Setenv(name, "") // restored after the test
		os.Unsetenv(name)
	}
	unset("AWS_REGION")
	unset("AWS_DEFAULT_REGION")
	a := Template{Name: "a", Path: write(t, t.TempDir(), "a.yaml", "ok")}
	key := func() string {
		t.Helper()
		salt, err := saltFor("cfn-lint 1")
		if err != nil {
			t.Fatal(err)
		}
		k, err := (&Linter{salt: salt}).Key(a)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	plain := key()
	t.Setenv("AWS_REGION", "us-east-1")
	if key() != plain {
		t.Error("AWS_REGION=us-east-1, the default, changed the key")
	}
	unset("AWS_REGION")
	seen := map[string]string{plain: "plain"}
	for _, step := range []struct {
		name   string
		change func()
	}{
		{"AWS_DEFAULT_REGION", func() { t.Setenv("AWS_DEFAULT_REGION", "eu-west-2") }},
		{"AWS_REGION", func() { t.Setenv("AWS_REGION", "eu-west-1") }},
		{".cfnlintrc", func() { write(t, home, ".cfnlintrc", "ignore_checks: [W1]\n") }},
		{".cfnlintrc changed", func() { write(t, home, ".cfnlintrc", "ignore_checks: [W2]\n") }},
	} {
		step.change()
		k := key()
		if before, ok := seen[k]; ok {
			t.Errorf("%s: same key as %s", step.name, before)
		}
		seen[k] = step.name
	}
}

// TestArgsMayNotChooseTheFormat: the package reads cfn-lint's JSON, so a
// template's Args may not choose another output.
func TestArgsMayNotChooseTheFormat(t *testing.T) {
	l, _ := fake(t, true)
	a := write(t, t.TempDir(), "a.yaml", "ok")
	for _, args := range [][]string{{"--format", "parseable"}, {"-f", "json"}, {"--"}, {"--output-file", "x"}} {
		if _, err := l.Lint(context.Background(), []Template{{Name: "a", Path: a, Args: args}}); err == nil {
			t.Errorf("Args %q accepted", args)
		}
	}
}
