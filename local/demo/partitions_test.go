//go:build integration

package demo

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// TestPartitionsKeepEachItemOnOneServer copies the table to a second
// moto_server, as the demo does for its DynamoDB partitions, and writes keys
// through the partitioned client: each key's writes reach one server (a
// conditional create of a key that exists fails there), its reads and
// deletes reach the same one, and the keys are spread over both servers.
func TestPartitionsKeepEachItemOnOneServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := mototest.Config(t)
	table := mototest.NewIdempotencyTable(t, cfg)
	srv, err := motoserver.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	other := cfg.Copy()
	other.BaseEndpoint = aws.String(srv.URL)
	clients := []*dynamodb.Client{dynamodb.NewFromConfig(cfg), dynamodb.NewFromConfig(other)}
	if err := copyTable(ctx, clients[0], clients[1], table); err != nil {
		t.Fatal(err)
	}
	parts := partitioned{serializeWrites(clients[0]), serializeWrites(clients[1])}
	key := func(id string) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{dynamostore.AttrID: &ddbtypes.AttributeValueMemberS{Value: id}}
	}
	create := func(id string) error {
		_, err := parts.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(table),
			Key:                       key(id),
			UpdateExpression:          aws.String("SET #s = :s"),
			ConditionExpression:       aws.String("attribute_not_exists(#id)"),
			ExpressionAttributeNames:  map[string]string{"#s": dynamostore.AttrStatus, "#id": dynamostore.AttrID},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":s": &ddbtypes.AttributeValueMemberS{Value: "PROCESSING"}},
		})
		return err
	}
	const keys = 20
	for i := range keys {
		id := fmt.Sprintf("p#order-%05d", i)
		if err := create(id); err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
		var ccf *ddbtypes.ConditionalCheckFailedException
		if err := create(id); !errors.As(err, &ccf) {
			t.Errorf("second create of %s: %v, want the condition to fail on the item's partition", id, err)
		}
		got, err := parts.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key(id), ConsistentRead: aws.Bool(true)})
		if err != nil || len(got.Item) == 0 {
			t.Errorf("get %s: %v, want the item from its partition", id, err)
		}
	}
	// Every third key deleted: each delete must reach the server that
	// holds the item for the count below to come out right.
	const deleted = (keys + 2) / 3
	for i := 0; i < keys; i += 3 {
		id := fmt.Sprintf("p#order-%05d", i)
		if _, err := parts.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String(table), Key: key(id), ConditionExpression: aws.String("attribute_exists(#id)"),
			ExpressionAttributeNames: map[string]string{"#id": dynamostore.AttrID},
		}); err != nil {
			t.Errorf("delete %s: %v, want it deleted on its partition", id, err)
		}
	}
	total := 0
	for i, c := range clients {
		out, err := c.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table)})
		if err != nil {
			t.Fatal(err)
		}
		if out.Count == 0 {
			t.Errorf("partition %d holds no item: the keys are not spread", i)
		}
		total += int(out.Count)
	}
	if total != keys-deleted {
		t.Errorf("%d items over the partitions, want %d: a key was written to both, or deleted on the wrong one", total, keys-deleted)
	}
}
