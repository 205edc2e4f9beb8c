package dedupe_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/dedupe"
)

// TestRecordSchemaForReaders: a reader outside the lock protocol (the demo's
// check of a deployed stack) finds a completed key with RecordID, AttrID and
// AttrStatus alone, and a key under another prefix is another record.
func TestRecordSchemaForReaders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if res := b.guard.Do(context.Background(), "order-1", succeed); res.Err != nil {
		t.Fatalf("Do: %+v", res)
	}
	id := dedupe.RecordID("orders-fn", "order-1")
	out, err := b.client.BatchGetItem(context.Background(), &dynamodb.BatchGetItemInput{
		RequestItems: map[string]types.KeysAndAttributes{b.table: {
			ConsistentRead: aws.Bool(true),
			Keys: []map[string]types.AttributeValue{
				{dedupe.AttrID: &types.AttributeValueMemberS{Value: id}},
				{dedupe.AttrID: &types.AttributeValueMemberS{Value: dedupe.RecordID("other-fn", "order-1")}},
			},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	items := out.Responses[b.table]
	if len(items) != 1 {
		t.Fatalf("%d items for the two record ids, want only %s's", len(items), id)
	}
	gotID, _ := items[0][dedupe.AttrID].(*types.AttributeValueMemberS)
	status, _ := items[0][dedupe.AttrStatus].(*types.AttributeValueMemberS)
	if gotID == nil || gotID.Value != id || status == nil || status.Value != string(dedupe.StatusCompleted) {
		t.Errorf("record %v, want id %s with %s %s", items[0], id, dedupe.AttrStatus, dedupe.StatusCompleted)
	}
}
