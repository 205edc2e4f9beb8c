//go:build integration

package dynamostore_test

import (
	"testing"

	"github.com/sqs-once/sqs-once/internal/local/mototest"
)

// TestMain runs the package's integration tests against a moto_server of
// their own (mototest.MainPrivate, not the one a whole `make test` shares),
// its Lambda without Docker (an Invoke answers what the test queued), a
// setting of the whole server that would hide other packages'
// CloudFormation functions. Without the integration tag there is no TestMain: the
// hermetic tests need no server.
func TestMain(m *testing.M) { mototest.MainPrivate(m, mototest.LambdaWithoutDocker) }
