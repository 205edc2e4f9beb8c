// Package docs holds the checks of the repository's documentation
// (README.md, docs/, CHANGELOG.md, the examples' and packages' READMEs)
// against itself, the code and template.yaml: the README stays short, every
// relative link resolves, the configuration reference lists exactly what
// the binaries read with the limits the code enforces, and each version
// number the docs mention is the template's. It has tests only, and they
// need nothing but Go, but the demo's flags (the integration tag: a hermetic
// test may not import internal/local); the parameter table, which needs the
// SAM translator, is checked in internal/templatetest.
package docs
