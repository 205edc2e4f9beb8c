//go:build integration

package sqsonce

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/local/dynalite"
	"github.com/sqs-once/sqs-once/internal/local/dynamodblocal"
	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// The DynamoDB store on two implementations of the DynamoDB API: moto_server,
// which returns the old item with a failed condition as DynamoDB does, and
// dynalite, which does not (as DynamoDB Local before 2.2 and other
// DynamoDB-compatible stores), so the store reads the record itself after a
// refusal.

// backend is one implementation the DynamoDB store runs on: a client of it,
// and a new table on it for each test.
type backend struct {
	name     string
	client   *dynamodb.Client
	api      dynamostore.AdminAPI
	newTable func(t *testing.T) string
	// oldItemOnRefusal: a refused write carries the record it was refused
	// by, so the store needs no GetItem.
	oldItemOnRefusal bool
}

func motoBackend(t *testing.T) backend {
	cfg := mototest.Config(t)
	client := dynamodb.NewFromConfig(cfg)
	return backend{
		// moto's writes made atomic per item, as DynamoDB's are.
		name: "moto", client: client, api: motoserver.Atomic(client), oldItemOnRefusal: true,
		newTable: func(t *testing.T) string { return mototest.NewIdempotencyTable(t, cfg) },
	}
}

// dynaliteBackend starts a dynalite for t.
func dynaliteBackend(t *testing.T) backend {
	cfg := dynalite.Config(t)
	client := dynamodb.NewFromConfig(cfg)
	return backend{
		name: "dynalite", client: client, api: client,
		newTable: func(t *testing.T) string { return dynalite.NewIdempotencyTable(t, cfg) },
	}
}

func backends(t *testing.T) []backend {
	return []backend{motoBackend(t), dynaliteBackend(t)}
}

// calls are the calls per protocol operation that reached c since the
// last look (countingDynamo's names: acquire, renew, complete, release,
// read, forget, scan).
func calls(c *countingDynamo) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	got := c.counts
	c.counts = nil
	return got
}

func sameCalls(got, want map[string]int) bool {
	if len(got) != len(want) {
		return false
	}
	for op, n := range want {
		if got[op] != n {
			return false
		}
	}
	return true
}

// doProcessor is a Processor for Do on store, at a clock that stands still
// at now: a lock taken under a context without a deadline lasts until
// now+15 min, and a completion's window ends at now+24 h.
func doProcessor(t *testing.T, st store.Store, now time.Time, localCache int) *Processor {
	t.Helper()
	p, err := New(Config{Store: st, KeyPrefix: "app", LocalCache: localCache, Test: TestConfig{Now: func() time.Time { return now }}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The lock of a Do under a context without a deadline, with LockTimeout
// zero (Config's documentation), and the default window.
const (
	docNoDeadlineLock = 30 * time.Second
	defaultWindow     = 24 * time.Hour
)

// TestDynaliteWithoutOldItem is the case: on a store that does not
// return the old item with a failed condition, a completed key was
// reported "PROCESSING until 0001-01-01" and retried until dead-lettered,
// and a released key stayed in progress. Through a Processor's Do: a
// completed key is a duplicate until its window ends, a released key is
// acquired again, a held key is in progress until its holder's real
// expiry; each refusal costs the refused write and one GetItem.
func TestDynaliteWithoutOldItem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := dynaliteBackend(t)
	now := time.Now().Truncate(time.Second)

	t.Run("completed key is a duplicate", func(t *testing.T) {
		api := &countingDynamo{AdminAPI: b.api}
		p := doProcessor(t, dynamostore.New(api, b.newTable(t)), now, 0)
		if err := p.Do(ctx, "order-1", func(context.Context) error { return nil }); err != nil {
			t.Fatalf("first Do: %v", err)
		}
		calls(api)
		ran := false
		err := p.Do(ctx, "order-1", func(context.Context) error { ran = true; return nil })
		if ran {
			t.Error("a completed key's function ran again")
		}
		var held *store.HeldError
		if !errors.Is(err, ErrDuplicate) || !errors.As(err, &held) {
			t.Fatalf("second Do: %v, want a *HeldError matching ErrDuplicate", err)
		}
		if want := now.Add(defaultWindow); !held.Until().Equal(want) || strings.Contains(err.Error(), "0001-01-01") {
			t.Errorf("duplicate held until %s (%v), want the window's end %s", held.Until(), err, want)
		}
		if got, want := calls(api), map[string]int{"acquire": 1, "read": 1}; !sameCalls(got, want) {
			t.Errorf("a duplicate on dynalite made %v, want %v: the refused acquire and one read", got, want)
		}
	})

	t.Run("released key is acquired again", func(t *testing.T) {
		p := doProcessor(t, dynamostore.New(b.api, b.newTable(t)), now, 0)
		boom := errors.New("boom")
		var fences []int64
		if err := p.Do(ctx, "order-2", func(ctx context.Context) error { fences = append(fences, Fence(ctx)); return boom }); !errors.Is(err, boom) {
			t.Fatalf("failing Do: %v, want its function's error", err)
		}
		if err := p.Do(ctx, "order-2", func(ctx context.Context) error { fences = append(fences, Fence(ctx)); return nil }); err != nil {
			t.Fatalf("Do after a release: %v, want it to run", err)
		}
		if len(fences) != 2 || fences[1] != fences[0]+1 {
			t.Errorf("fences %v, want the second one more than the first", fences)
		}
	})

	t.Run("held key is in progress until its holder's expiry", func(t *testing.T) {
		api := &countingDynamo{AdminAPI: b.api}
		p := doProcessor(t, dynamostore.New(api, b.newTable(t)), now, 0)
		started, finish := make(chan struct{}), make(chan struct{})
		holder := make(chan error, 1)
		go func() {
			holder <- p.Do(ctx, "order-3", func(context.Context) error {
				close(started)
				<-finish
				return nil
			})
		}()
		<-started
		calls(api)
		ran := false
		err := p.Do(ctx, "order-3", func(context.Context) error { ran = true; return nil })
		if ran {
			t.Error("a held key's function ran in a second Do")
		}
		var held *store.HeldError
		if !errors.Is(err, ErrInProgress) || !errors.As(err, &held) {
			t.Fatalf("Do while held: %v, want a *HeldError matching ErrInProgress", err)
		}
		if want := now.Add(docNoDeadlineLock); !held.Until().Equal(want) {
			t.Errorf("in progress until %s (%v), want the holder's lock expiry %s", held.Until(), err, want)
		}
		if got, want := calls(api), map[string]int{"acquire": 1, "read": 1}; !sameCalls(got, want) {
			t.Errorf("an in-progress refusal on dynalite made %v, want %v", got, want)
		}
		close(finish)
		if err := <-holder; err != nil {
			t.Fatalf("holder's Do: %v", err)
		}
		if err := p.Do(ctx, "order-3", func(context.Context) error { return nil }); !errors.Is(err, ErrDuplicate) {
			t.Errorf("Do after the holder completed: %v, want ErrDuplicate", err)
		}
	})
}

// TestDynamoDBStoreCallsPerRecord: against DynamoDB (moto_server, which
// returns the old item with a refusal, as DynamoDB does) a record costs the
// floor: a new key 2 calls (acquire, complete), a duplicate 1, a failure 2
// (acquire, release), an in-progress refusal 1, a duplicate the local
// cache remembers 0; GetItem never.
func TestDynamoDBStoreCallsPerRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := motoBackend(t)
	api := &countingDynamo{AdminAPI: b.api}
	now := time.Now().Truncate(time.Second)
	p := doProcessor(t, dynamostore.New(api, b.newTable(t)), now, 0)
	cached := doProcessor(t, dynamostore.New(api, b.newTable(t)), now, 10)
	ok := func(context.Context) error { return nil }

	step := func(what string, want map[string]int, do func() error, wantErr error) {
		t.Helper()
		calls(api)
		if err := do(); !errors.Is(err, wantErr) {
			t.Fatalf("%s: %v, want %v", what, err, wantErr)
		}
		if got := calls(api); !sameCalls(got, want) {
			t.Errorf("%s made %v, want %v", what, got, want)
		}
	}
	step("a new key", map[string]int{"acquire": 1, "complete": 1}, func() error { return p.Do(ctx, "new", ok) }, nil)
	step("a duplicate", map[string]int{"acquire": 1}, func() error { return p.Do(ctx, "new", ok) }, ErrDuplicate)
	boom := errors.New("boom")
	step("a failure", map[string]int{"acquire": 1, "release": 1}, func() error {
		return p.Do(ctx, "fails", func(context.Context) error { return boom })
	}, boom)

	started, finish := make(chan struct{}), make(chan struct{})
	holder := make(chan error, 1)
	go func() {
		holder <- p.Do(ctx, "held", func(context.Context) error { close(started); <-finish; return nil })
	}()
	<-started
	step("an in-progress refusal", map[string]int{"acquire": 1}, func() error { return p.Do(ctx, "held", ok) }, ErrInProgress)
	close(finish)
	if err := <-holder; err != nil {
		t.Fatalf("holder's Do: %v", err)
	}

	step("a new key (local cache on)", map[string]int{"acquire": 1, "complete": 1}, func() error { return cached.Do(ctx, "warm", ok) }, nil)
	step("a warm duplicate", map[string]int{}, func() error { return cached.Do(ctx, "warm", ok) }, ErrDuplicate)
}

// putItem writes a record by hand, as another version (or application) of
// the table's writers would have.
func putItem(t *testing.T, b backend, table string, attrs map[string]string, numbers map[string]int64) {
	t.Helper()
	item := map[string]types.AttributeValue{}
	for k, v := range attrs {
		item[k] = &types.AttributeValueMemberS{Value: v}
	}
	for k, n := range numbers {
		item[k] = &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
	}
	if _, err := b.client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		t.Fatalf("put %v: %v", item, err)
	}
}

// The lock's tests run on DynamoDB Local too: Amazon's engine, beside
// moto_server (lock_helpers_integration_test.go), so that every claim of
// the lock about DynamoDB holds on both.
func init() { lockBackends = append(lockBackends, lockBackend{"dynamodblocal", newLockLocalEnv}) }

func newLockLocalEnv(t testing.TB) *lockEnv {
	cfg := dynamodblocal.Config(t)
	client := dynamodblocal.NewClient(cfg)
	return lockDynamo{client: client, api: client, table: dynamodblocal.NewIdempotencyTable(t, cfg)}.env()
}
