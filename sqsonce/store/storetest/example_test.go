package storetest_test

import (
	"testing"

	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/memstore"
	"github.com/sqs-once/sqs-once/sqsonce/store/storetest"
)

// A store of your own proves itself with the conformance suite, from a test
// in its package. An Example cannot take a *testing.T, so this one only
// shows the test (it is compiled, not run); storetest's own
// TestMemoryStore is exactly this.
func ExampleTestStore() {
	// In mystore_test.go:
	TestMyStore := func(t *testing.T) {
		storetest.TestStore(t, func(t *testing.T) store.Store {
			// Your store: a fresh one, or one on a table the rules share.
			return memstore.New()
		})
	}
	_ = TestMyStore
}
