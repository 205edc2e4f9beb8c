//go:build race

package ops_test

// raceEnabled: the test binary was built with -race, so building the CLI
// with -race too reuses the packages the test build compiled.
const raceEnabled = true
