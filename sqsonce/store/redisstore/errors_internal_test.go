package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// serverError is an error reply, as go-redis returns one.
type serverError string

func (e serverError) Error() string { return string(e) }
func (serverError) RedisError()     {}

// TestStoreErrorClasses: what no retry fixes matches ErrMisconfigured, the
// rest ErrUnavailable, and never both.
func TestStoreErrorClasses(t *testing.T) {
	misconfigured := []error{
		serverError("WRONGTYPE Operation against a key holding the wrong kind of value"),
		serverError("NOSCRIPT No matching script. Please use EVAL."),
		serverError("NOPERM User orders has no permissions to run the 'evalsha' command"),
		serverError("WRONGPASS invalid username-password pair or user is disabled."),
		serverError("NOAUTH Authentication required."),
		serverError("ERR unknown command 'PEXPIRETIME', with args beginning with: "),
		fmt.Errorf("wrapped: %w", serverError("ERR Error running script (call to f_x): @user_script:1: user_script:1: bad")),
	}
	unavailable := []error{
		io.EOF,
		context.DeadlineExceeded,
		context.Canceled,
		errors.New("dial tcp 127.0.0.1:6379: connect: connection refused"),
		serverError("LOADING Redis is loading the dataset in memory"),
		serverError("READONLY You can't write against a read only replica."),
		serverError("OOM command not allowed when used memory > 'maxmemory'."),
		serverError("BUSY Redis is busy running a script."),
		serverError("ERR max number of clients reached"),
		serverError("CLUSTERDOWN The cluster is down"),
	}
	for _, err := range misconfigured {
		got := storeError("acquire", "p#k", err)
		if !errors.Is(got, store.ErrMisconfigured) || errors.Is(got, store.ErrUnavailable) {
			t.Errorf("%v: misconfigured %v, unavailable %v; want misconfigured only", err, errors.Is(got, store.ErrMisconfigured), errors.Is(got, store.ErrUnavailable))
		}
		if !errors.Is(got, err) {
			t.Errorf("%v: the StoreError does not unwrap to the cause", err)
		}
	}
	for _, err := range unavailable {
		got := storeError("acquire", "p#k", err)
		if errors.Is(got, store.ErrMisconfigured) || !errors.Is(got, store.ErrUnavailable) {
			t.Errorf("%v: misconfigured %v, unavailable %v; want unavailable only", err, errors.Is(got, store.ErrMisconfigured), errors.Is(got, store.ErrUnavailable))
		}
	}
}

// TestKeysShareTheHashTag: a record's two keys carry the id as their hash
// tag; an id that would make the tag empty (it starts with "}"), so that
// the keys could fall in different cluster slots, is refused as
// misconfigured, before any call.
func TestKeysShareTheHashTag(t *testing.T) {
	s := &Store{prefix: DefaultKeyPrefix}
	keys, err := s.keys("acquire", "orders#A-1}x")
	if err != nil || keys[0] != "sqsonce:{orders#A-1}x}" || keys[1] != "sqsonce:{orders#A-1}x}:fence" {
		t.Errorf("keys = %q, %v", keys, err)
	}
	for _, id := range []string{"", "}orders#A-1"} {
		if _, err := s.keys("acquire", id); !errors.Is(err, store.ErrMisconfigured) {
			t.Errorf("keys(%q) returned %v; want ErrMisconfigured", id, err)
		}
	}
}
