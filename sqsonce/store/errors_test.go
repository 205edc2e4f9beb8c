package store_test

import (
	"errors"
	"testing"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// TestStoreErrorNamesItsRecordOrNone: an error names the record its call
// was about, and a call about none (a store's check) shows no empty id.
func TestStoreErrorNamesItsRecordOrNone(t *testing.T) {
	cause := errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	for _, tc := range []struct {
		err  *store.StoreError
		want string
	}{
		{&store.StoreError{Op: "acquire", ID: "orders#k1", Err: cause}, `sqsonce: acquire "orders#k1": dial tcp 127.0.0.1:6379: connect: connection refused`},
		{&store.StoreError{Op: "check", Err: cause}, `sqsonce: check: dial tcp 127.0.0.1:6379: connect: connection refused`},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}
