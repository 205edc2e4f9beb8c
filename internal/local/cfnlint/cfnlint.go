// Package cfnlint runs cfn-lint on CloudFormation templates and remembers
// on disk which templates it found clean, so that a template linted clean
// once is not linted again until something its verdict depends on changes.
//
// cfn-lint is the slowest check the project runs: importing it takes two
// seconds of CPU and each template of this project's size several more (its
// SAM transform and condition solver), so the template tests' thirty-odd
// templates cost minutes of CPU on every run, though template.yaml rarely
// changes between them.
//
// A verdict is keyed by a SHA-256 of everything it depends on: the
// template's bytes and extension, cfn-lint's version (cfn-lint --version),
// the flags it ran with, the region it checks against (from AWS_REGION or
// AWS_DEFAULT_REGION, which cfn-lint reads when no --regions is given) and
// the user's ~/.cfnlintrc. Only clean verdicts are kept: a failing template
// is linted, and its findings shown, every time. Templates not found clean
// before are linted a few to a cfn-lint process (Linter.Processes), which
// reports each finding under its file's name.
//
// The verdicts live in $XDG_CACHE_HOME/sqs-once/cfn-lint (~/.cache when
// XDG_CACHE_HOME is unset), or in the directory CacheDirEnv names;
// NoCacheEnv turns the cache off. It needs the standard library only.
package cfnlint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
)

const (
	// CacheDirEnv names the environment variable that, when set, is the
	// directory the clean verdicts are kept in, instead of
	// $XDG_CACHE_HOME/sqs-once/cfn-lint.
	CacheDirEnv = "SQS_ONCE_CFN_LINT_CACHE_DIR"
	// NoCacheEnv names the environment variable that, set to anything but
	// "" or "0", turns the cache off: every template is linted, and no
	// verdict is written.
	NoCacheEnv = "SQS_ONCE_CFN_LINT_NO_CACHE"
)

// keyVersion changes when what a key covers changes, so that verdicts
// kept under an older scheme are not read as current.
const keyVersion = "sqs-once cfn-lint verdict 1"

// Template is one file to lint.
type Template struct {
	// Name is how a report names the template (a file name, or the
	// parameters it was pinned to): every line of its Report starts with
	// it.
	Name string
	// Path is the template's file.
	Path string
	// Args are cfn-lint flags for this template, such as
	// {"--ignore-checks", "W1028"}. The package chooses the output format;
	// Args may not.
	Args []string
}

// Verdict is what cfn-lint found in one Template.
type Verdict struct {
	Template Template
	// Clean is true when cfn-lint reported nothing for the template.
	Clean bool
	// Cached is true when the template was found clean before, with the
	// same key, and so was not linted this time.
	Cached bool
	// Entry is the cache's file for the template's key ("" when the cache
	// is off): there when the template was found clean.
	Entry string
	// KeepErr is why a clean verdict could not be written to the cache
	// (the next run lints the template again); nil otherwise.
	KeepErr error
	// Report is cfn-lint's findings on the template, one per line,
	// prefixed with the template's Name; or, when cfn-lint failed without
	// naming a template, its exit status and output. Empty when Clean.
	Report string
}

// Linter lints templates with one cfn-lint executable, through the cache.
// It is safe for concurrent use.
type Linter struct {
	exe      string
	version  string
	cacheDir string // "": no cache
	// salt is the part of every key the templates share: the version, the
	// regions, the user's configuration.
	salt []byte
	// Processes is the most cfn-lint processes Lint runs, side by side,
	// for templates with the same Args; 0 means one per CPU. cfn-lint
	// checks one template at a time, and a template of template.yaml's
	// size takes it two to three times as much CPU as starting does
	// (five to seven seconds against two on this project's machines),
	// so one process over thirty templates keeps one core busy for
	// minutes while the other idles; a process per CPU costs a start
	// each.
	Processes int
}

// New finds cfn-lint on PATH and asks for its version; it reads the cache
// settings from the environment. It fails when cfn-lint is missing or does
// not answer.
func New(ctx context.Context) (*Linter, error) {
	exe, err := exec.LookPath("cfn-lint")
	if err != nil {
		return nil, fmt.Errorf("cfnlint: cfn-lint is not on PATH (make setup installs it into .venv; or pip install cfn-lint): %w", err)
	}
	dir, err := cacheDir()
	if err != nil {
		return nil, err
	}
	return newLinter(ctx, exe, dir)
}

func newLinter(ctx context.Context, exe, dir string) (*Linter, error) {
	work, err := os.MkdirTemp("", "cfnlint-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	cmd := exec.CommandContext(ctx, exe, "--version")
	cmd.Dir = work // see run
	out, err := cmd.CombinedOutput()
	version := strings.TrimSpace(string(out))
	if err != nil || version == "" {
		return nil, fmt.Errorf("cfnlint: %s --version: %v\n%s", exe, err, out)
	}
	salt, err := saltFor(version)
	if err != nil {
		return nil, err
	}
	return &Linter{exe: exe, version: version, cacheDir: dir, salt: salt}, nil
}

// Version is what cfn-lint --version answered, such as "cfn-lint 1.51.0".
func (l *Linter) Version() string { return l.version }

// CacheDir is the directory the verdicts are kept in; "" when the cache is
// off.
func (l *Linter) CacheDir() string { return l.cacheDir }

// cacheDir is where the verdicts live, from the environment; "" when
// NoCacheEnv turns the cache off.
func cacheDir() (string, error) {
	if v := os.Getenv(NoCacheEnv); v != "" && v != "0" {
		return "", nil
	}
	if dir := os.Getenv(CacheDirEnv); dir != "" {
		return filepath.Abs(dir)
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" || !filepath.IsAbs(base) { // the XDG spec: a relative value is ignored
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("cfnlint: no directory for the cache (set %s, or %s=1): %w", CacheDirEnv, NoCacheEnv, err)
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "sqs-once", "cfn-lint"), nil
}

// saltFor is the part of a key every template shares: the key's scheme,
// cfn-lint's version, the region cfn-lint checks when no --regions flag
// is given (from the environment), and the user's configuration file,
// which cfn-lint reads from the home directory (the project's, from the
// working directory, never applies: run lints in an empty one).
func saltFor(version string) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\nversion %q\nregion %q\n", keyVersion, version, region())
	home, err := os.UserHomeDir()
	if err != nil {
		return b.Bytes(), nil // no home: cfn-lint finds no user configuration either
	}
	// The names and order cfn-lint's config.py looks for.
	for _, name := range []string{".cfnlintrc", ".cfnlintrc.yaml", ".cfnlintrc.yml"} {
		data, err := os.ReadFile(filepath.Join(home, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cfnlint: user configuration: %w", err)
		}
		fmt.Fprintf(&b, "user config %s %d\n", name, len(data))
		b.Write(data)
		break
	}
	return b.Bytes(), nil
}

// region is the region cfn-lint checks a template against when no
// --regions flag is given, as its config.py chooses it: AWS_REGION when
// set (even to ""), else AWS_DEFAULT_REGION when set, else us-east-1. So a
// test binary, whose moto_server sets both to us-east-1, and make lint,
// with neither set, share their verdicts.
func region() string {
	if r, ok := os.LookupEnv("AWS_REGION"); ok {
		return r
	}
	if r, ok := os.LookupEnv("AWS_DEFAULT_REGION"); ok {
		return r
	}
	return "us-east-1"
}

// Key is the cache key of t: a SHA-256, in hex, of what cfn-lint's verdict
// on it depends on. It reads t's file.
func (l *Linter) Key(t Template) (string, error) {
	data, err := os.ReadFile(t.Path)
	if err != nil {
		return "", fmt.Errorf("cfnlint: %s: %w", t.Name, err)
	}
	args, err := json.Marshal(append([]string{"--format", "json"}, t.Args...))
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write(l.salt)
	// The extension: cfn-lint reads a .json file as JSON, anything else as
	// YAML first.
	fmt.Fprintf(h, "args %s\nextension %q\ntemplate %d\n", args, filepath.Ext(t.Path), len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Lint lints every template not found clean before and returns a Verdict
// for each, in the order given. Templates with the same Args are linted
// several to a cfn-lint process (at most Processes processes), templates
// with other Args in processes of their own, all side by side.
// The error is for what kept cfn-lint from answering at all (a template
// that cannot be read, a cancelled ctx); findings are in the verdicts.
func (l *Linter) Lint(ctx context.Context, templates []Template) ([]Verdict, error) {
	verdicts := make([]Verdict, len(templates))
	keys := make([]string, len(templates))
	// run names the files by absolute path, and cfn-lint reports them so.
	absolute := slices.Clone(templates)
	groups := map[string][]int{} // by Args: one process each
	var order []string
	for i, t := range templates {
		verdicts[i].Template = t
		if err := checkArgs(t.Args); err != nil {
			return nil, fmt.Errorf("cfnlint: %s: %w", t.Name, err)
		}
		abs, err := filepath.Abs(t.Path)
		if err != nil {
			return nil, err
		}
		absolute[i].Path = abs
		key, err := l.Key(t)
		if err != nil {
			return nil, err
		}
		keys[i] = key
		verdicts[i].Entry = l.entry(key)
		if l.known(key) {
			verdicts[i].Clean, verdicts[i].Cached = true, true
			continue
		}
		g := strings.Join(t.Args, "\x00")
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], i)
	}
	// Each set of flags is split across up to Processes runs, side by
	// side; each run's clean verdicts are kept as soon as it ends, so a
	// run cut short by ctx loses only its own.
	var runs [][]int
	for _, g := range order {
		idx := groups[g]
		n := min(len(idx), l.processes())
		for k := range n {
			var chunk []int
			for j := k; j < len(idx); j += n {
				chunk = append(chunk, idx[j])
			}
			runs = append(runs, chunk)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(runs))
	for n, chunk := range runs {
		wg.Go(func() {
			if errs[n] = l.run(ctx, absolute, chunk, verdicts); errs[n] != nil {
				return
			}
			for _, i := range chunk {
				if verdicts[i].Clean {
					verdicts[i].KeepErr = l.remember(keys[i])
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return verdicts, nil
}

// processes is the most cfn-lint runs Lint splits one set of flags
// across.
func (l *Linter) processes() int {
	if l.Processes > 0 {
		return l.Processes
	}
	return runtime.NumCPU()
}

// checkArgs refuses flags that would change what run reads back.
func checkArgs(args []string) error {
	for _, a := range args {
		if a == "--" || a == "-f" || strings.HasPrefix(a, "--format") || strings.HasPrefix(a, "--output-file") {
			return fmt.Errorf("flag %q is the package's to choose", a)
		}
	}
	return nil
}

// finding is the part of cfn-lint's JSON output a report shows.
type finding struct {
	Filename *string
	Level    string
	Message  string
	Location struct {
		Start struct{ LineNumber, ColumnNumber int }
	}
	Rule struct{ Id string }
}

// run lints templates[idx] (which share their Args) in one cfn-lint
// process and fills in their verdicts. cfn-lint names each finding's file
// as it was given, an absolute path here; a finding with no file (a
// configuration error) or output that is not JSON is every template's.
func (l *Linter) run(ctx context.Context, templates []Template, idx []int, verdicts []Verdict) error {
	// An empty working directory: a project's .cfnlintrc there would apply
	// to the lint without being part of the key, and a ./cfnlint directory
	// would shadow the Python package.
	work, err := os.MkdirTemp("", "cfnlint-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	args := append([]string{"--format", "json"}, templates[idx[0]].Args...)
	args = append(args, "--")
	byPath := map[string][]int{}
	for _, i := range idx {
		args = append(args, templates[i].Path)
		byPath[templates[i].Path] = append(byPath[templates[i].Path], i)
	}
	cmd := exec.CommandContext(ctx, l.exe, args...)
	cmd.Dir = work
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("cfnlint: cfn-lint on %d templates: %w", len(idx), ctx.Err())
	}
	var findings []finding
	parseErr := json.Unmarshal(stdout.Bytes(), &findings)
	if stdout.Len() == 0 && runErr == nil {
		parseErr = nil // nothing to say: cfn-lint prints [] then, but an empty answer is as clean
	}
	reports := map[int][]string{}
	var unnamed []string
	for _, f := range findings {
		line := fmt.Sprintf("%d:%d: %s %s %s", f.Location.Start.LineNumber, f.Location.Start.ColumnNumber, f.Rule.Id, f.Level, f.Message)
		if f.Filename == nil || len(byPath[*f.Filename]) == 0 {
			name := "(no file)"
			if f.Filename != nil {
				name = *f.Filename
			}
			unnamed = append(unnamed, name+": "+line)
			continue
		}
		for _, i := range byPath[*f.Filename] {
			reports[i] = append(reports[i], templates[i].Name+": "+line)
		}
	}
	// A failure no finding explains (a crash, a configuration error,
	// output that is not JSON) is every template's: none of them can be
	// called clean.
	var general string
	switch {
	case parseErr != nil || len(unnamed) > 0:
		general = fmt.Sprintf("cfn-lint %s: %v\n%s%s%s", strings.Join(args, " "), runErr, strings.Join(unnamed, "\n"), stdout.String(), stderr.String())
	case runErr != nil && len(findings) == 0:
		general = fmt.Sprintf("cfn-lint %s: %v, and no finding\n%s", strings.Join(args, " "), runErr, stderr.String())
	case stderr.Len() > 0:
		// Clean means cfn-lint said nothing: a warning it printed beside
		// its findings (a deprecation, a spec it could not load) is a
		// failure too, as when its output was read whole.
		general = fmt.Sprintf("cfn-lint %s wrote to its standard error:\n%s", strings.Join(args, " "), stderr.String())
	}
	for _, i := range idx {
		v := &verdicts[i]
		switch {
		case len(reports[i]) > 0:
			v.Report = strings.Join(reports[i], "\n")
		case general != "":
			v.Report = templates[i].Name + ": " + strings.TrimSpace(general)
		default:
			v.Clean = true
		}
	}
	return nil
}

// entry is the file that records key's clean verdict; "" when the cache
// is off.
func (l *Linter) entry(key string) string {
	if l.cacheDir == "" {
		return ""
	}
	return filepath.Join(l.cacheDir, key)
}

// known reports whether key was found clean before.
func (l *Linter) known(key string) bool {
	if l.cacheDir == "" {
		return false
	}
	_, err := os.Stat(l.entry(key))
	return err == nil
}

// remember records key's clean verdict: an empty file named by the key,
// written under another name and renamed, so that a reader never sees a
// half-written one.
func (l *Linter) remember(key string) error {
	if l.cacheDir == "" {
		return nil
	}
	if err := os.MkdirAll(l.cacheDir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(l.cacheDir, ".tmp-")
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "%s\nclean\n", l.version)
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), l.entry(key)); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

// Failures returns the reports of the verdicts that are not clean, in
// order, each naming its template.
func Failures(verdicts []Verdict) []string {
	var out []string
	for _, v := range verdicts {
		if !v.Clean {
			out = append(out, v.Report)
		}
	}
	return slices.Clip(out)
}
