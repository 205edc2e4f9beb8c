package main

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestProbeFindsWhatPATHHas(t *testing.T) {
	m := newMachine(t, fullPython(), "python3", "moto_server", "spin", "java", "npm")
	m.write(".tools/node_modules/dynalite/package.json", `{"name":"dynalite","version":"4.0.0"}`)
	m.write(".tools/node_modules/amplify-dynamodb-simulator/package.json", `{"name":"amplify-dynamodb-simulator","version":"2.9.30"}`)
	f, err := probe(t.Context(), m.root, os.Getenv("PATH"), "", "")
	if err != nil {
		t.Fatal(err)
	}
	want := Facts{
		Root:          os.Geteuid() == 0,
		Commands:      map[string]bool{"python3": true, "moto_server": true, "spin": true, "java": true, "npm": true},
		Python:        fullPython(),
		Dynalite:      "4.0.0",
		DynamoDBLocal: "2.9.30",
		Tools:         true,
	}
	if !reflect.DeepEqual(f, want) {
		t.Errorf("probe\n got %+v (python %+v)\nwant %+v (python %+v)", f, f.Python, want, want.Python)
	}
}

// The Makefile puts .venv/bin first on PATH; probe looks there too, so
// that setup run by hand agrees with the recipes.
func TestProbeLooksInTheVenvFirst(t *testing.T) {
	m := newMachine(t, nil)
	for _, name := range []string{"python", "cfn-lint"} {
		m.write(filepath.Join(Venv, "bin", name), "")
		if err := os.Chmod(filepath.Join(m.root, Venv, "bin", name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	m.write(filepath.Join(Venv, "bin", "moto_server"), "") // not executable: not a command
	f, err := probe(t.Context(), m.root, os.Getenv("PATH"), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if !f.Venv || !reflect.DeepEqual(f.Commands, map[string]bool{"cfn-lint": true}) || f.Python != nil || f.Dynalite != "" || f.DynamoDBLocal != "" {
		t.Errorf("probe = %+v; want .venv, cfn-lint, no python3, no dynalite, no DynamoDB Local", f)
	}
}

func TestProbeReportsAPythonThatDoesNotAnswer(t *testing.T) {
	m := newMachine(t, nil, "python3")
	t.Setenv(fakePythonEnv, "Traceback (most recent call last):")
	_, err := probe(t.Context(), m.root, os.Getenv("PATH"), "", "")
	if err == nil || !strings.Contains(err.Error(), filepath.Join(m.bin, "python3")) {
		t.Errorf("probe error = %v, want one naming %s", err, filepath.Join(m.bin, "python3"))
	}
}

func TestReadPins(t *testing.T) {
	pins, err := readPins(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	// The tools CI runs, at the major versions the code is written for
	// (moto's patches, cfn-lint's rules).
	for dist, major := range map[string]string{"moto": "5", "cfn-lint": "1", "aws-sam-translator": "1", "pyyaml": ""} {
		v, ok := pins[dist]
		if !ok || major != "" && !strings.HasPrefix(v, major+".") {
			t.Errorf("%s: %s pins %s %q, want an exact pin of major version %q", dist, Requirements, dist, v, major)
		}
	}
	// Every pinned distribution is asked about: the integration tier
	// checks that python3 has the pinned version.
	for dist := range pins {
		if !slices.Contains(probedDists, dist) {
			t.Errorf("%s pins %s, which probe does not ask python3 about", Requirements, dist)
		}
	}
	// Every distribution the plan checks has a pin to check it against.
	_, dists := needs(Test)
	for _, d := range dists {
		if _, ok := pins[d.Dist]; !ok {
			t.Errorf("the plan checks %s, which %s does not pin", d.Dist, Requirements)
		}
	}

	dir := t.TempDir()
	for content, wantErr := range map[string]string{
		"Moto[server]==5.2.1  # comment\n\n# only a comment\nPyYAML == 6.0.3\nruamel_yaml==0.18\n": "",
		"moto[server]>=5\n":                 `"moto[server]>=5" is not an exact pin`,
		"cfn-lint\n":                        `"cfn-lint" is not an exact pin`,
		"moto==5.2.1; python_version>'3'\n": "is not an exact pin",
	} {
		if err := os.WriteFile(filepath.Join(dir, Requirements), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		pins, err := readPins(dir)
		switch {
		case wantErr == "" && err != nil:
			t.Errorf("%q: %v", content, err)
		case wantErr == "" && !reflect.DeepEqual(pins, map[string]string{"moto": "5.2.1", "pyyaml": "6.0.3", "ruamel-yaml": "0.18"}):
			t.Errorf("%q: pins %v", content, pins)
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Errorf("%q: error %v, want %q", content, err, wantErr)
		}
	}
}

// Debian's postgres is off PATH: probe finds it in the directory it is
// given, and only there besides PATH.
func TestProbeFindsPostgresOffPATH(t *testing.T) {
	m := newMachine(t, nil)
	m.write("pg/bin/postgres", "")
	if err := os.Chmod(filepath.Join(m.root, "pg", "bin", "postgres"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := probe(t.Context(), m.root, os.Getenv("PATH"), filepath.Join(m.root, "pg", "bin"), "")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.Commands, map[string]bool{"postgres": true}) {
		t.Errorf("probe with postgres in the directory given found %v; want postgres", f.Commands)
	}
	if f, err := probe(t.Context(), m.root, os.Getenv("PATH"), "", ""); err != nil || f.Commands["postgres"] {
		t.Errorf("probe without the directory found postgres (%v, %v); want it missing", f.Commands, err)
	}
}

// Debian's mariadbd is in /usr/sbin, off an ordinary user's PATH: probe
// finds it in the directory it is given, and only there besides PATH.
func TestProbeFindsMariadbdOffPATH(t *testing.T) {
	m := newMachine(t, nil)
	m.write("sbin/mariadbd", "")
	if err := os.Chmod(filepath.Join(m.root, "sbin", "mariadbd"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := probe(t.Context(), m.root, os.Getenv("PATH"), "", filepath.Join(m.root, "sbin"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.Commands, map[string]bool{"mariadbd": true}) {
		t.Errorf("probe with mariadbd in the directory given found %v; want mariadbd", f.Commands)
	}
	if f, err := probe(t.Context(), m.root, os.Getenv("PATH"), filepath.Join(m.root, "sbin"), ""); err != nil || f.Commands["mariadbd"] {
		t.Errorf("probe with mariadbd in PostgreSQL's directory only found it (%v, %v); want it missing", f.Commands, err)
	}
}
