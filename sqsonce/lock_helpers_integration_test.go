//go:build integration

package sqsonce

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/testclock"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// The lock tests on DynamoDB: moto_server, as they ran before the Store
// seam.
func init() { lockBackends = append(lockBackends, lockBackend{"dynamodb", newLockDynamoEnv}) }

// lockDynamo is a table of the test's own on the package's moto_server.
type lockDynamo struct {
	client *dynamodb.Client
	// api is the client as the store sees it: moto's writes made atomic, as
	// DynamoDB's are (motoserver.Atomic).
	api   dynamostore.AdminAPI
	table string
}

func newLockDynamo(t testing.TB) lockDynamo {
	t.Helper()
	cfg := mototest.Config(t)
	client := dynamodb.NewFromConfig(cfg)
	return lockDynamo{
		client: client,
		api:    motoserver.Atomic(client),
		table:  mototest.NewIdempotencyTable(t, cfg),
	}
}

// newLockDynamoEnv is a lockEnv on DynamoDB. The clock starts at the real
// time, so that a context deadline set from it is one moto's real calls can
// meet.
func newLockDynamoEnv(t testing.TB) *lockEnv { return newLockDynamo(t).env() }

// env is the lockEnv on d's table.
func (d lockDynamo) env() *lockEnv {
	calls := new(atomic.Int32)
	counted := func() store.Store {
		return dynamostore.New(lockCountingDynamo{AdminAPI: d.api, calls: calls}, d.table)
	}
	raw := dynamostore.New(d.api, d.table)
	return &lockEnv{
		clock:     testclock.New(time.Now().Truncate(time.Second)),
		store:     counted(),
		newStore:  counted,
		uncounted: raw,
		calls:     calls,
		read: func(t *testing.T, id string) (store.Record, bool) {
			t.Helper()
			rec, err := raw.Read(context.Background(), id)
			if errors.Is(err, store.ErrNotFound) {
				return store.Record{}, false
			}
			if err != nil {
				t.Fatalf("read %s: %v", id, err)
			}
			return rec, true
		},
		put:    d.put,
		remove: d.remove,
	}
}

// put writes rec's attributes, as the holder that wrote it would have.
func (d lockDynamo) put(t *testing.T, rec store.Record) {
	t.Helper()
	item := map[string]types.AttributeValue{
		dynamostore.AttrID:     &types.AttributeValueMemberS{Value: rec.ID},
		dynamostore.AttrStatus: &types.AttributeValueMemberS{Value: string(rec.Status)},
		"owner":                &types.AttributeValueMemberS{Value: rec.Owner},
		"fence":                &types.AttributeValueMemberN{Value: strconv.FormatInt(rec.Fence, 10)},
		"payloadHash":          &types.AttributeValueMemberS{Value: rec.PayloadHash},
	}
	if !rec.LockExpiresAt.IsZero() {
		item["lockExpiresAt"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(rec.LockExpiresAt.UnixMilli(), 10)}
	}
	if !rec.ExpiresAt.IsZero() {
		item[dynamostore.AttrExpiresAt] = &types.AttributeValueMemberN{Value: strconv.FormatInt(rec.ExpiresAt.Unix(), 10)}
	}
	if _, err := d.client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(d.table), Item: item}); err != nil {
		t.Fatal(err)
	}
}

func (d lockDynamo) putItem(t *testing.T, item map[string]types.AttributeValue) {
	t.Helper()
	if _, err := d.client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(d.table), Item: item}); err != nil {
		t.Fatal(err)
	}
}

func (d lockDynamo) remove(t *testing.T, id string) {
	t.Helper()
	if _, err := d.client.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(d.table), Key: lockKey(id)}); err != nil {
		t.Fatal(err)
	}
}

func lockKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{dynamostore.AttrID: &types.AttributeValueMemberS{Value: id}}
}

// lockCountingDynamo counts the table calls a store makes.
type lockCountingDynamo struct {
	dynamostore.AdminAPI
	calls *atomic.Int32
}

func (c lockCountingDynamo) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.calls.Add(1)
	return c.AdminAPI.UpdateItem(ctx, in, o...)
}

func (c lockCountingDynamo) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.calls.Add(1)
	return c.AdminAPI.GetItem(ctx, in, o...)
}

func (c lockCountingDynamo) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	c.calls.Add(1)
	return c.AdminAPI.DeleteItem(ctx, in, o...)
}

func (c lockCountingDynamo) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	c.calls.Add(1)
	return c.AdminAPI.Scan(ctx, in, o...)
}
