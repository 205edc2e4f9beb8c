// Package docs checks the repository's documentation (README.md, docs/,
// CHANGELOG.md, the READMEs of the examples and of the packages) against
// itself, the code and template.yaml: the README stays short, every
// relative link resolves, the configuration reference lists exactly what
// the binaries read with the limits the code enforces, and each version
// number the docs mention is the template's. Its tests need nothing but
// Go. It exports the Markdown readers (Root, Read, Prose, Table, Name) to
// the checks that live beside what they check in the other modules: the
// CLI's flags (cmd/sqs-once) and the demo's (local/demo); the parameter
// table, which needs the SAM translator, is checked in local/templatetest.
package docs
