//go:build integration

package targets_test

import (
	"testing"

	"github.com/sqs-once/sqs-once/internal/local/mototest"
)

func TestMain(m *testing.M) { mototest.MainWith(m, mototest.LambdaWithoutDocker) }
