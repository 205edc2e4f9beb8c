//go:build integration

package dynamostore_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/local/dynalite"
	"github.com/sqs-once/sqs-once/internal/local/dynamodblocal"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// The table's records as others see them: a reader outside the protocol,
// and records the lock protocol did not write (an older version's, another
// application's), on DynamoDB Local, whose refusal carries the record as
// DynamoDB's does, and on dynalite, where the store reads it.

// backend is one implementation the store runs on: a client of it, and a
// new table on it for each test.
type backend struct {
	name     string
	client   *dynamodb.Client
	api      dynamostore.AdminAPI
	newTable func(t *testing.T) string
	// oldItemOnRefusal: a refused write carries the record it was refused
	// by, so the store needs no GetItem.
	oldItemOnRefusal bool
}

func backends(t *testing.T) []backend {
	local := dynamodblocal.Config(t)
	localClient := dynamodblocal.NewClient(local)
	lite := dynalite.Config(t)
	liteClient := dynamodb.NewFromConfig(lite)
	return []backend{{
		name: "dynamodblocal", client: localClient, api: localClient, oldItemOnRefusal: true,
		newTable: func(t *testing.T) string { return dynamodblocal.NewIdempotencyTable(t, local) },
	}, {
		name: "dynalite", client: liteClient, api: liteClient,
		newTable: func(t *testing.T) string { return dynalite.NewIdempotencyTable(t, lite) },
	}}
}

// opCounter counts the calls that reach the table, per DynamoDB operation.
type opCounter struct {
	dynamostore.AdminAPI
	mu     sync.Mutex
	counts map[string]int
}

func (c *opCounter) add(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.counts[op]++
}

// take is the calls since the last take.
func (c *opCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	got := c.counts
	c.counts = nil
	return got
}

func (c *opCounter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.add("UpdateItem")
	return c.AdminAPI.UpdateItem(ctx, in, o...)
}

func (c *opCounter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.add("GetItem")
	return c.AdminAPI.GetItem(ctx, in, o...)
}

func (c *opCounter) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	c.add("DeleteItem")
	return c.AdminAPI.DeleteItem(ctx, in, o...)
}

func (c *opCounter) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	c.add("Scan")
	return c.AdminAPI.Scan(ctx, in, o...)
}

func sameCalls(got, want map[string]int) bool {
	if got == nil {
		got = map[string]int{}
	}
	return maps.Equal(got, want)
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

// TestDynamoDBStoreUnfencedLock: a live PROCESSING record written without a
// fence (as every version before fencing wrote them: id, status, owner,
// lockExpiresAt, expiresAt) reads with Fence 0 and is released by the
// operator's release (Release with the lease read from the record), which
// `sqs-once release --force` refused with "record changed since it was
// read". The key is then acquired again, its fence starting from the
// clock.
func TestDynamoDBStoreUnfencedLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			table := b.newTable(t)
			st := dynamostore.New(b.api, table)
			now := time.Now().Truncate(time.Millisecond)
			id := store.RecordID("app", "legacy")
			lockUntil := now.Add(10 * time.Minute)
			putItem(t, b, table, map[string]string{
				dynamostore.AttrID: id, dynamostore.AttrStatus: string(store.StatusProcessing), "owner": "old-version-owner",
			}, map[string]int64{
				"lockExpiresAt": lockUntil.UnixMilli(), dynamostore.AttrExpiresAt: lockUntil.Add(time.Hour).Unix(),
			})

			rec, err := st.Read(ctx, id)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if rec.Status != store.StatusProcessing || rec.Owner != "old-version-owner" || rec.Fence != 0 || !rec.LockExpiresAt.Equal(lockUntil) || !rec.Live(now) {
				t.Fatalf("Read = %+v, want a live PROCESSING lock of old-version-owner until %s, fence 0", rec, lockUntil)
			}
			if _, err := st.Acquire(ctx, store.AcquireRequest{ID: id, Owner: "new", Now: now, LockUntil: now.Add(time.Minute)}); !errors.Is(err, store.ErrInProgress) {
				t.Fatalf("Acquire of the unfenced live lock: %v, want ErrInProgress", err)
			}

			if err := st.Release(ctx, store.Lease{ID: rec.ID, Owner: rec.Owner}, now); err != nil {
				t.Fatalf("the operator's release of an unfenced lock: %v", err)
			}
			if rec, err := st.Read(ctx, id); err != nil || rec.Status != store.StatusReleased {
				t.Fatalf("after the release: %+v, %v; want RELEASED", rec, err)
			}
			lease, err := st.Acquire(ctx, store.AcquireRequest{ID: id, Owner: "new", Now: now, LockUntil: now.Add(time.Minute)})
			if err != nil {
				t.Fatalf("Acquire after the release: %v", err)
			}
			if want := store.FenceSeed(now) + 1; lease.Fence != want || lease.TookOver {
				t.Errorf("lease %+v, want fence %d (from the clock: the record had none), not a takeover", lease, want)
			}
			if rec, err := st.Read(ctx, id); err != nil || rec.Fence != lease.Fence || rec.Owner != "new" {
				t.Errorf("after the acquisition: %+v, %v; want owner new, fence %d", rec, err, lease.Fence)
			}
		})
	}
}

// TestDynamoDBStoreForeignRecord: a record the protocol did not write under
// a key's id makes Acquire fail with ErrMisconfigured (the function does
// not run, and no retry helps), whether the refusal carried the record or
// the store read it.
func TestDynamoDBStoreForeignRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	past := now.Add(-time.Hour)
	cases := []struct {
		name    string
		attrs   map[string]string
		numbers map[string]int64
	}{
		{"unknown status", map[string]string{dynamostore.AttrStatus: "FOO", "owner": "x"}, map[string]int64{"lockExpiresAt": past.UnixMilli(), dynamostore.AttrExpiresAt: past.Unix()}},
		{"lock without expiry", map[string]string{dynamostore.AttrStatus: string(store.StatusProcessing), "owner": "x"}, map[string]int64{dynamostore.AttrExpiresAt: now.Add(time.Hour).Unix()}},
		{"completion without window", map[string]string{dynamostore.AttrStatus: string(store.StatusCompleted), "owner": "x"}, nil},
	}
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			table := b.newTable(t)
			api := &opCounter{AdminAPI: b.api}
			st := dynamostore.New(api, table)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					id := store.RecordID("app", c.name)
					attrs := map[string]string{dynamostore.AttrID: id}
					for k, v := range c.attrs {
						attrs[k] = v
					}
					putItem(t, b, table, attrs, c.numbers)
					api.take()
					_, err := st.Acquire(ctx, store.AcquireRequest{ID: id, Owner: "o", Now: now, LockUntil: now.Add(time.Minute)})
					if !errors.Is(err, store.ErrMisconfigured) {
						t.Errorf("Acquire: %v, want ErrMisconfigured", err)
					}
					if errors.Is(err, store.ErrInProgress) || errors.Is(err, store.ErrDuplicate) {
						t.Errorf("Acquire: %v, which a caller would take for a held key", err)
					}
					want := map[string]int{"UpdateItem": 1, "GetItem": 1}
					if b.oldItemOnRefusal {
						want = map[string]int{"UpdateItem": 1}
					}
					if got := api.take(); !sameCalls(got, want) {
						t.Errorf("calls %v, want %v", got, want)
					}
					if _, err := st.Read(ctx, id); !errors.Is(err, store.ErrMisconfigured) {
						t.Errorf("Read: %v, want ErrMisconfigured", err)
					}
				})
			}
		})
	}
}

// TestStoreRecordSchemaForReaders: a reader outside the lock protocol (the
// demo's check of a deployed stack) finds a completed key with RecordID,
// AttrID and AttrStatus alone, and a key under another prefix is another
// record.
func TestStoreRecordSchemaForReaders(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	client := dynamodb.NewFromConfig(cfg)
	table := mototest.NewIdempotencyTable(t, cfg)
	p, err := sqsonce.New(sqsonce.Config{
		Store:        dynamostore.New(client, table),
		KeyPrefix:    "orders-fn",
		LockTimeout:  30 * time.Second,
		DedupeWindow: time.Hour,
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Do(context.Background(), "order-1", func(context.Context) error { return nil }); err != nil {
		t.Fatalf("Do: %v", err)
	}
	id := store.RecordID("orders-fn", "order-1")
	out, err := client.BatchGetItem(context.Background(), &dynamodb.BatchGetItemInput{
		RequestItems: map[string]types.KeysAndAttributes{table: {
			ConsistentRead: aws.Bool(true),
			Keys:           []map[string]types.AttributeValue{recordKey(id), recordKey(store.RecordID("other-fn", "order-1"))},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	items := out.Responses[table]
	if len(items) != 1 {
		t.Fatalf("%d items for the two record ids, want only %s's", len(items), id)
	}
	gotID, _ := items[0][dynamostore.AttrID].(*types.AttributeValueMemberS)
	status, _ := items[0][dynamostore.AttrStatus].(*types.AttributeValueMemberS)
	if gotID == nil || gotID.Value != id || status == nil || status.Value != string(store.StatusCompleted) {
		t.Errorf("record %v, want id %s with %s %s", items[0], id, dynamostore.AttrStatus, store.StatusCompleted)
	}
}

// recordKey is the key of the record under id.
func recordKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{dynamostore.AttrID: &types.AttributeValueMemberS{Value: id}}
}
