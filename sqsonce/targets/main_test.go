//go:build integration

package targets_test

import (
	"testing"

	"github.com/sqs-once/sqs-once/internal/local/mototest"
)

// TestMain runs the package's integration tests against a moto_server of
// their own, never the one a whole `make test` may share
// (mototest.MainPrivate): the Lambda tests queue what the next Invoke of
// the region answers (mototest.QueueInvokeResults), and another test
// binary's Invoke on a shared server could take it.
func TestMain(m *testing.M) { mototest.MainPrivate(m, mototest.LambdaWithoutDocker) }
