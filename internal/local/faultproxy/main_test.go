//go:build integration

package faultproxy_test

import (
	"testing"

	"github.com/sqs-once/sqs-once/internal/local/mototest"
)

func TestMain(m *testing.M) { mototest.Main(m) }
