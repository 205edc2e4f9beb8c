// Package mototest is the integration-test harness: one moto_server per test
// binary, the process environment pointed at it, and helpers that create
// uniquely named tables and queues so parallel tests never share state.
// Only test files with the integration build tag import it, or any package
// of internal/local other than the one they test: plain `go test ./...`
// needs nothing but Go, and tiers_test.go fails on an untagged test file
// that would start a server.
package mototest
