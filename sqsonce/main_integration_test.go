//go:build integration

package sqsonce_test

import (
	"testing"

	"github.com/sqs-once/sqs-once/internal/local/mototest"
)

// TestMain runs the package's integration tests against a moto_server (the
// one a whole `make test` shares, or one started for them: mototest.Main),
// its Lambda without Docker (an Invoke answers what the test queued). Without the integration tag there is no TestMain: the
// hermetic tests need no server.
func TestMain(m *testing.M) { mototest.MainWith(m, mototest.LambdaWithoutDocker) }
