package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// probedCommands are the commands whose presence NewPlan asks about.
var probedCommands = []string{"moto_server", "cfn-lint", "aws", "python3", "spin", "gcc", "tmux", "redis-server", "postgres", "mariadbd", "java", "node", "npm", "apt-get", "sudo", "flock"}

// probedDists are the distributions python3 is asked about (lower case,
// as NewPlan looks them up): every one requirements-dev.txt pins, for the
// integration tier's check that CI runs the pinned versions.
var probedDists = []string{"moto", "cfn-lint", "aws-sam-translator", "pyyaml", "awscli"}

// pythonScript prints what Python needs to know about python3, as JSON.
// importlib.metadata reads the installed distributions' metadata without
// importing them, which keeps the fast path fast (moto alone takes a
// second to import).
const pythonScript = `import importlib.metadata as m, importlib.util as u, json, sys
pk = {}
for d in sys.argv[1:]:
    try:
        pk[d] = m.version(d)
    except m.PackageNotFoundError:
        pass
print(json.dumps({"major": sys.version_info[0], "minor": sys.version_info[1],
    "ensurepip": u.find_spec("ensurepip") is not None, "packages": pk}))
`

// probe finds the Facts of the machine for the module at root, looking
// for commands on path (a PATH value) with root's .venv/bin first, as the
// Makefile's recipes see them, and for postgres also in pgBin, where
// Debian's package puts it (off PATH; internal/local/pgserver looks there),
// and for mariadbd also in mariaBin, Debian's /usr/sbin (off an ordinary
// user's PATH; internal/local/mariaserver looks there).
func probe(ctx context.Context, root, path, pgBin, mariaBin string) (Facts, error) {
	dirs := append([]string{filepath.Join(root, Venv, "bin")}, filepath.SplitList(path)...)
	f := Facts{Root: os.Geteuid() == 0, Commands: map[string]bool{}}
	var python3 string
	for _, c := range probedCommands {
		in := dirs
		switch c {
		case "postgres":
			in = append(append([]string(nil), dirs...), pgBin)
		case "mariadbd":
			in = append(append([]string(nil), dirs...), mariaBin)
		}
		if p, ok := lookPath(in, c); ok {
			f.Commands[c] = true
			if c == "python3" {
				python3 = p
			}
		}
	}
	if python3 != "" {
		py, err := askPython(ctx, python3, strings.Join(dirs, string(filepath.ListSeparator)))
		if err != nil {
			return Facts{}, err
		}
		f.Python = py
	}
	if fi, err := os.Stat(filepath.Join(root, Venv, "bin", "python")); err == nil && !fi.IsDir() {
		f.Venv = true
	}
	tools := filepath.Join(root, ".tools")
	if _, err := os.Lstat(tools); err == nil {
		f.Tools = true
	}
	f.Dynalite = npmVersion(tools, "dynalite")
	f.DynamoDBLocal = npmVersion(tools, DynamoDBLocalPackage)
	return f, nil
}

// lookPath is exec.LookPath over dirs rather than this process's PATH.
func lookPath(dirs []string, name string) (string, bool) {
	for _, d := range dirs {
		if d == "" {
			continue
		}
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

func askPython(ctx context.Context, python3, path string) (*Python, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python3, append([]string{"-c", pythonScript}, probedDists...)...)
	// The same PATH as the lookup: a pyenv shim chooses its interpreter by it.
	cmd.Env = append(os.Environ(), "PATH="+path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("ask %s what it has: %v\n%s", python3, err, stderr.String())
	}
	var ans struct {
		Major, Minor int
		Ensurepip    bool
		Packages     map[string]string
	}
	if err := json.Unmarshal(out, &ans); err != nil {
		return nil, fmt.Errorf("ask %s what it has: %v (it said %q)", python3, err, out)
	}
	return &Python{Major: ans.Major, Minor: ans.Minor, Ensurepip: ans.Ensurepip, Packages: ans.Packages}, nil
}

// npmVersion is the version of the npm package pkg in npm's prefix (.tools,
// or the shared copy), "" when there is none or it cannot be read (then the
// install replaces it).
func npmVersion(prefix, pkg string) string {
	if prefix == "" {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(prefix, "node_modules", pkg, "package.json"))
	if err != nil {
		return ""
	}
	var meta struct{ Version string }
	if json.Unmarshal(b, &meta) != nil {
		return ""
	}
	return meta.Version
}
