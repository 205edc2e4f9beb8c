package sqsoncetest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/sqsoncetest"
)

// A store of your own proves itself with the conformance suite, from a test
// in its package. An Example cannot take a *testing.T, so this one only
// shows the test (it is compiled, not run); sqsoncetest's own
// TestMemoryStore is exactly this.
func ExampleTestStore() {
	// In mystore_test.go:
	TestMyStore := func(t *testing.T) {
		sqsoncetest.TestStore(t, func(t *testing.T) sqsonce.Store {
			// Your store: a fresh one, or one on a table the rules share.
			return sqsoncetest.NewStore()
		})
	}
	_ = TestMyStore
}

// A Processor on the in-memory store runs a key once, with no AWS anywhere:
// the second Do of the same key is a duplicate.
func ExampleNewStore() {
	store := sqsoncetest.NewStore()
	p, err := sqsonce.New(sqsonce.Config{Store: store, KeyPrefix: "app", Now: store.Now}, nil)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	charge := func(ctx context.Context) error {
		fmt.Println("charging order", sqsonce.Key(ctx))
		return nil
	}
	fmt.Println("first:", p.Do(ctx, "order-1", charge))
	err = p.Do(ctx, "order-1", charge)
	fmt.Println("second is a duplicate:", errors.Is(err, sqsonce.ErrDuplicate))
	fmt.Println("record:", store.Records()["app#order-1"].Status)
	// Output:
	// charging order order-1
	// first: <nil>
	// second is a duplicate: true
	// record: COMPLETED
}
