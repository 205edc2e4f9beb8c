//go:build integration

package motoserver_test

import (
	"testing"

	"github.com/sqs-once/sqs-once/internal/local/mototest"
)

// TestMain gives the tests that need a running server (the conditional-write
// races and the benchmark) one moto_server for the package; the tests of
// Start itself still start their own.
func TestMain(m *testing.M) { mototest.Main(m) }
