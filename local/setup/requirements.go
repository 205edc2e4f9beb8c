package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Requirements is the pinned requirements file of the Python tools,
// relative to the module's root.
const Requirements = "requirements-dev.txt"

// readPins reads the exact pins (name==version, extras allowed) of the
// requirements file at root, by lower-case distribution name. Anything
// but an exact pin is an error: the file is what CI's versions are.
func readPins(root string) (map[string]string, error) {
	file := filepath.Join(root, Requirements)
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pins := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		name, version, ok := strings.Cut(line, "==")
		name, _, _ = strings.Cut(name, "[")
		// PEP 503's normalisation, as pip compares names.
		name = strings.NewReplacer("_", "-", ".", "-").Replace(strings.ToLower(strings.TrimSpace(name)))
		version = strings.TrimSpace(version)
		if !ok || name == "" || version == "" || strings.ContainsAny(version, "<>=!~,; ") {
			return nil, fmt.Errorf("%s:%d: %q is not an exact pin (name==version)", file, n, line)
		}
		pins[name] = version
	}
	return pins, sc.Err()
}
