// Package version holds the release version of sqs-once, in one place: the
// CLI's --version, the functions' start-up log line and, by a test, the
// template's SemanticVersion and the newest CHANGELOG.md entry all say it.
package version

// Version is the release this tree builds. Bump it with the template's
// SemanticVersion and a new CHANGELOG.md entry; TestOneVersion fails until
// all three agree.
const Version = "0.7.0"
