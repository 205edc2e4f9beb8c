package sqsoncetest_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/sqsoncetest"
)

// A Processor on the in-memory store runs a key once, with no AWS anywhere:
// the second Do of the same key is a duplicate.
func ExampleNewStore() {
	store := sqsoncetest.NewStore()
	p, err := sqsonce.New(sqsonce.Config{Store: store, KeyPrefix: "app", Test: sqsonce.TestConfig{Now: store.Now}})
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
