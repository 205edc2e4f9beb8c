// Command releasecheck checks offline what a release of sqs-once's modules
// needs, and tidies them: the modules of go.work are published separately
// (the library, each store that brings a driver, the processor, the CLI),
// and each requires the others at the version being released, which no
// proxy serves before it is tagged. So releasecheck serves this checkout's
// modules at that version from a temporary file proxy (GOPROXY=file://…,
// the module zips made from the files git tracks or would track) and runs
// the go command on each module in module mode (GOWORK=off) against it: what
// `go install …@vX` and a user's `go get` will do once the tags are pushed.
//
// Run from the repository's root (make release-check, make tidy):
//
//	releasecheck            every check below; fails on the first kind that fails
//	releasecheck -tidy      go mod tidy in every module (writes go.mod and go.sum)
//	releasecheck -lint      the checks make lint runs (no build of the CLI)
//
// The checks: no module has a replace directive; every requirement of one
// of these modules by another names v + internal/version.Version, as do
// template.yaml's SemanticVersion and CHANGELOG.md's newest entry; every
// module is tidy (go.mod as `go mod tidy` writes it; go.sum too, but for the
// lines of these modules, which a module's go.sum gets when the versions it
// requires are published, docs/development.md "Releasing"); the CLI's module
// lists no harness module and builds, and `sqs-once --version` prints the
// version; a user module that imports only sqsonce and the DynamoDB store
// has no PostgreSQL, Redis or MySQL driver in `go list -m all`.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// repoPath is the module path every module of this repository starts with.
const repoPath = "github.com/sqs-once/sqs-once"

// drivers are the modules a program on sqsonce and the DynamoDB store must
// not have in its module graph.
func drivers() []string {
	return []string{"github.com/jackc/pgx", "github.com/redis/go-redis", "github.com/go-sql-driver/mysql"}
}

func main() {
	tidy := flag.Bool("tidy", false, "run go mod tidy in every module of go.work (writes go.mod and go.sum), then stop")
	lint := flag.Bool("lint", false, "only the checks make lint runs: replace directives, versions, tidiness, the user module's graph")
	flag.Parse()
	if err := run(*tidy, *lint); err != nil {
		fmt.Fprintln(os.Stderr, "releasecheck:", err)
		os.Exit(1)
	}
}

// mod is one module of go.work.
type mod struct {
	dir  string // relative to the repository's root
	path string
	file *modfile.File
}

func run(tidy, lint bool) error {
	mods, err := readWork("go.work")
	if err != nil {
		return err
	}
	version, err := readVersion()
	if err != nil {
		return err
	}
	if tidy {
		// Twice, each time against the modules as they are then: a
		// module's tidy can change what another, tidied before it,
		// requires through it.
		for range 2 {
			if err := withProxy(mods, version, func(env []string, _ string) error {
				for _, m := range mods {
					if err := tidyModule(env, m); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	}
	return withProxy(mods, version, func(env []string, tmp string) error {
		return check(mods, version, env, tmp, lint)
	})
}

// withProxy serves mods at version from a file proxy in a temporary
// directory, with a module cache of its own, and calls f with the go
// command's environment for it.
func withProxy(mods []mod, version string, f func(env []string, tmp string) error) error {
	tmp, err := os.MkdirTemp("", "releasecheck-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	proxy := filepath.Join(tmp, "proxy")
	for _, m := range mods {
		if err := serve(proxy, m, mods, version); err != nil {
			return fmt.Errorf("%s: make its module zip: %w", m.dir, err)
		}
	}
	env, err := goEnv(proxy)
	if err != nil {
		return err
	}
	return f(env, tmp)
}

// check runs the checks (without the CLI's build when lint).
func check(mods []mod, version string, env []string, tmp string, lint bool) error {
	var problems []string
	problems = append(problems, checkRequirements(mods, version)...)
	problems = append(problems, checkWork(mods, version)...)
	problems = append(problems, checkVersions(version)...)
	for _, m := range mods {
		problems = append(problems, checkTidy(env, tmp, m)...)
	}
	if len(problems) > 0 {
		return errors.New("\n  " + strings.Join(problems, "\n  "))
	}
	if err := checkUserGraph(env, tmp); err != nil {
		return err
	}
	fmt.Println("releasecheck: no replace, one version (" + version + ") everywhere, every module tidy, a DynamoDB user's module graph without " + strings.Join(drivers(), ", "))
	if lint {
		return nil
	}
	if err := checkCLI(env, tmp, version); err != nil {
		return err
	}
	return nil
}

// readWork returns go.work's modules.
func readWork(name string) ([]mod, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("run from the repository's root: %w", err)
	}
	w, err := modfile.ParseWork(name, data, nil)
	if err != nil {
		return nil, err
	}
	var mods []mod
	for _, u := range w.Use {
		dir := filepath.Clean(u.Path)
		gomod := filepath.Join(dir, "go.mod")
		data, err := os.ReadFile(gomod)
		if err != nil {
			return nil, err
		}
		f, err := modfile.Parse(gomod, data, nil)
		if err != nil {
			return nil, err
		}
		mods = append(mods, mod{dir: dir, path: f.Module.Mod.Path, file: f})
	}
	return mods, nil
}

// readVersion returns "v" + internal/version.Version.
func readVersion() (string, error) {
	data, err := os.ReadFile(filepath.Join("internal", "version", "version.go"))
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^const Version = "([^"]+)"`).FindSubmatch(data)
	if m == nil {
		return "", errors.New("internal/version/version.go has no `const Version = \"…\"`")
	}
	return "v" + string(m[1]), nil
}

// published reports whether a module is one users require, so has its
// module zip served: the repository's, not the examples'.
func published(m mod) bool { return strings.HasPrefix(m.path, repoPath) }

// serve writes m at version into the file proxy at dir, as the module proxy
// serves a tagged module: its .info, .mod and .zip.
func serve(dir string, m mod, mods []mod, version string) error {
	if !published(m) {
		return nil
	}
	at := filepath.Join(dir, filepath.FromSlash(escape(m.path)), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	info, _ := json.Marshal(map[string]any{"Version": version, "Time": time.Now().UTC().Format(time.RFC3339)})
	if err := os.WriteFile(filepath.Join(at, version+".info"), info, 0o644); err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(m.dir, "go.mod"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(at, version+".mod"), gomod, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(at, "list"), []byte(version+"\n"), 0o644); err != nil {
		return err
	}
	files, err := moduleFiles(m, mods)
	if err != nil {
		return err
	}
	out, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		return err
	}
	zerr := modzip.Create(out, module.Version{Path: m.path, Version: version}, files)
	if err := errors.Join(zerr, out.Close()); err != nil {
		return err
	}
	return nil
}

// escape is the proxy's case encoding of a module path.
func escape(path string) string {
	e, err := module.EscapePath(path)
	if err != nil {
		return path
	}
	return e
}

// moduleFiles lists m's files as a tag would hold them: those git tracks
// or would track (not ignored), less the directories of other modules.
func moduleFiles(m mod, mods []mod) ([]modzip.File, error) {
	out, err := exec.Command("git", "ls-files", "-co", "--exclude-standard", "-z", "--", m.dir).Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	var files []modzip.File
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if name == "" || insideOther(name, m, mods) {
			continue
		}
		rel, err := filepath.Rel(m.dir, name)
		if err != nil {
			return nil, err
		}
		if _, err := os.Lstat(name); err != nil {
			continue // deleted, not yet committed
		}
		files = append(files, diskFile{path: filepath.ToSlash(rel), name: name})
	}
	return files, nil
}

// insideOther reports whether name lies in a module nested in m's
// directory: that module's zip holds it, not m's.
func insideOther(name string, m mod, mods []mod) bool {
	for _, o := range mods {
		if o.dir != m.dir && within(o.dir, m.dir) && within(name, o.dir) {
			return true
		}
	}
	// A nested module go.work does not list (a test's testdata) is not
	// part of m either.
	for dir := filepath.Dir(name); dir != "." && dir != m.dir && within(dir, m.dir); dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return true
		}
	}
	return false
}

// within reports whether path is dir or lies under it.
func within(path, dir string) bool {
	return dir == "." || path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}

// diskFile is a modzip.File read from the checkout.
type diskFile struct{ path, name string }

func (f diskFile) Path() string                 { return f.path }
func (f diskFile) Lstat() (os.FileInfo, error)  { return os.Lstat(f.name) }
func (f diskFile) Open() (io.ReadCloser, error) { return os.Open(f.name) }

// goEnv is the environment of a go command in module mode against the file
// proxy: the modules of this repository from it (no checksum database knows
// them yet), every other module from the machine's module cache when it has
// it, else as usual. The module cache is a fresh one under the temporary
// directory: a cache keeps the first copy of a version it gets forever, and
// this checkout's modules are served at a version that is not final until
// it is tagged.
func goEnv(proxy string) ([]string, error) {
	out, err := exec.Command("go", "env", "GOPROXY", "GOMODCACHE").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOPROXY GOMODCACHE: %w", err)
	}
	upstream, shared, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	abs, err := filepath.Abs(proxy)
	if err != nil {
		return nil, err
	}
	return append(os.Environ(),
		"GOWORK=off",
		"GOMODCACHE="+filepath.Join(filepath.Dir(abs), "modcache"),
		"GOPROXY=file://"+filepath.ToSlash(abs)+",file://"+filepath.ToSlash(filepath.Join(shared, "cache", "download"))+","+upstream,
		"GONOSUMDB="+repoPath,
		"GOFLAGS=-mod=mod -modcacherw",
	), nil
}

// goIn runs the go command in dir with env; the error carries its output.
func goIn(env []string, dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env = dir, env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("go %s (in %s): %w\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return out, nil
}

// tidyModule runs go mod tidy in m, then drops from its go.sum the lines of
// this repository's modules: they belong there only once those versions are
// published (docs/development.md, "Releasing").
func tidyModule(env []string, m mod) error {
	if _, err := goIn(env, m.dir, "mod", "tidy"); err != nil {
		return err
	}
	sum := filepath.Join(m.dir, "go.sum")
	data, err := os.ReadFile(sum)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return os.WriteFile(sum, []byte(strings.Join(foreignSums(data), "")), 0o644)
}

// foreignSums is go.sum's lines less those of this repository's modules.
func foreignSums(data []byte) []string {
	var keep []string
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, repoPath+" ") || strings.HasPrefix(line, repoPath+"/") {
			continue
		}
		keep = append(keep, line)
	}
	return keep
}

// checkRequirements: no replace, and every requirement of a module of this
// repository names version.
func checkRequirements(mods []mod, version string) []string {
	var problems []string
	for _, m := range mods {
		for _, r := range m.file.Replace {
			problems = append(problems, fmt.Sprintf("%s/go.mod replaces %s: a module others import cannot carry a replace (go.work joins the checkout's modules)", m.dir, r.Old.Path))
		}
		for _, r := range m.file.Require {
			if m.path == repoPath && strings.HasPrefix(r.Mod.Path, repoPath) {
				// Its users would get that module's requirements, a
				// store's driver among them.
				problems = append(problems, fmt.Sprintf("go.mod (the library's) requires %s: the library requires no other module of the repository", r.Mod.Path))
			}
			if strings.HasPrefix(r.Mod.Path, repoPath) && r.Mod.Version != version {
				problems = append(problems, fmt.Sprintf("%s/go.mod requires %s %s, not %s (internal/version): every module moves to the release's version together", m.dir, r.Mod.Path, r.Mod.Version, version))
			}
		}
	}
	return problems
}

// checkVersions: template.yaml's SemanticVersion and CHANGELOG.md's newest
// entry are version.
func checkVersions(version string) []string {
	var problems []string
	for _, c := range []struct {
		file string
		re   *regexp.Regexp
	}{
		{"template.yaml", regexp.MustCompile(`(?m)^\s+SemanticVersion:\s*(\S+)`)},
		{"CHANGELOG.md", regexp.MustCompile(`(?m)^## (\d+\.\d+\.\d+) - `)},
	} {
		data, err := os.ReadFile(c.file)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		m := c.re.FindSubmatch(data)
		if m == nil || "v"+string(m[1]) != version {
			got := "none"
			if m != nil {
				got = string(m[1])
			}
			problems = append(problems, fmt.Sprintf("%s says %s, internal/version %s", c.file, got, version))
		}
	}
	return problems
}

// checkWork: go.work points every module at version to the checkout, so
// that the go command need not read a version no proxy serves yet.
func checkWork(mods []mod, version string) []string {
	data, err := os.ReadFile("go.work")
	if err != nil {
		return []string{err.Error()}
	}
	w, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	for _, m := range mods {
		if !published(m) {
			continue
		}
		ok := false
		for _, r := range w.Replace {
			if r.Old.Path == m.path && r.Old.Version == version && filepath.Clean(r.New.Path) == m.dir {
				ok = true
			}
		}
		if !ok {
			problems = append(problems, fmt.Sprintf("go.work has no `replace %s %s => ./%s`", m.path, version, m.dir))
		}
	}
	return problems
}

// checkTidy runs go mod tidy on copies of m's go.mod and go.sum and
// compares: go.mod exactly, go.sum less this repository's modules' lines.
func checkTidy(env []string, tmp string, m mod) []string {
	dir := filepath.Join(tmp, "tidy", strings.ReplaceAll(m.dir, string(filepath.Separator), "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return []string{err.Error()}
	}
	gomod, err := os.ReadFile(filepath.Join(m.dir, "go.mod"))
	if err != nil {
		return []string{err.Error()}
	}
	gosum, err := os.ReadFile(filepath.Join(m.dir, "go.sum"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return []string{err.Error()}
	}
	if err := errors.Join(os.WriteFile(filepath.Join(dir, "go.mod"), gomod, 0o644), os.WriteFile(filepath.Join(dir, "go.sum"), gosum, 0o644)); err != nil {
		return []string{err.Error()}
	}
	if _, err := goIn(env, m.dir, "mod", "tidy", "-modfile="+filepath.Join(dir, "go.mod")); err != nil {
		return []string{err.Error()}
	}
	tidied, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	if !bytes.Equal(tidied, gomod) {
		problems = append(problems, fmt.Sprintf("%s/go.mod is not tidy: run make tidy", m.dir))
	}
	tidiedSum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return append(problems, err.Error())
	}
	if !slices.Equal(foreignSums(tidiedSum), foreignSums(gosum)) {
		problems = append(problems, fmt.Sprintf("%s/go.sum is not tidy: run make tidy", m.dir))
	}
	return problems
}

// checkUserGraph builds the module of a user on sqsonce and the DynamoDB
// store alone and looks for the other stores' drivers in its graph: Go's
// pruned graph holds every requirement of the modules it requires, so the
// library's go.mod must name none of them.
func checkUserGraph(env []string, tmp string) error {
	dir := filepath.Join(tmp, "user")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	main := `package main

import (
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

var _ = sqsonce.New
var _ = dynamostore.New

func main() {}
`
	if err := errors.Join(
		os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/user\n\ngo 1.26.0\n"), 0o644),
		os.WriteFile(filepath.Join(dir, "main.go"), []byte(main), 0o644),
	); err != nil {
		return err
	}
	if _, err := goIn(env, dir, "mod", "tidy"); err != nil {
		return err
	}
	out, err := goIn(env, dir, "list", "-m", "all")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(out), "\n") {
		for _, d := range drivers() {
			if strings.HasPrefix(line, d) {
				return fmt.Errorf("a module on sqsonce and dynamostore alone has %s in go list -m all: the library's go.mod must not require it", strings.TrimSpace(line))
			}
		}
	}
	return nil
}

// checkCLI: the CLI's module graph holds no harness module, it builds in
// module mode as go install builds it, and --version prints version.
func checkCLI(env []string, tmp, version string) error {
	dir := filepath.Join("cmd", "sqs-once")
	work := filepath.Join(tmp, "cli")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	for _, f := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(work, f), data, 0o644); err != nil {
			return err
		}
	}
	modfileFlag := "-modfile=" + filepath.Join(work, "go.mod")
	out, err := goIn(env, dir, "list", modfileFlag, "-m", "all")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(out), "\n") {
		if p, _, _ := strings.Cut(line, " "); p == repoPath+"/local" {
			return fmt.Errorf("GOWORK=off go list -m all in cmd/sqs-once lists the harness module %s", p)
		}
	}
	fmt.Printf("releasecheck: GOWORK=off go -C cmd/sqs-once list -m all: %d modules, no harness module\n", strings.Count(string(out), "\n"))
	bin := filepath.Join(tmp, "sqs-once")
	if _, err := goIn(env, dir, "build", modfileFlag, "-o", bin, "."); err != nil {
		return err
	}
	got, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return fmt.Errorf("sqs-once --version: %w", err)
	}
	if !strings.Contains(string(got), strings.TrimPrefix(version, "v")) {
		return fmt.Errorf("sqs-once --version prints %q, want %s", strings.TrimSpace(string(got)), version)
	}
	fmt.Printf("releasecheck: the CLI builds in module mode against the modules at %s; --version: %s", version, got)
	return nil
}
