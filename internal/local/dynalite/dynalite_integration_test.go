//go:build integration

package dynalite_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/local/dynalite"
)

// TestDynaliteAnswers pins down the two answers the DynamoDB store's tests
// on dynalite rely on. If a release of dynalite starts returning the old
// item with a failed condition, the store's read-after-refusal path is no
// longer tested by them, and this test says so.
func TestDynaliteAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := dynalite.Config(t)
	table := dynalite.NewIdempotencyTable(t, cfg)
	client := dynamodb.NewFromConfig(cfg)
	key := map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "app#k"}}
	update := func(cond string, v string) (*dynamodb.UpdateItemOutput, error) {
		return client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                           aws.String(table),
			Key:                                 key,
			ConditionExpression:                 aws.String(cond),
			UpdateExpression:                    aws.String("SET #s = :v"),
			ExpressionAttributeNames:            map[string]string{"#s": "status"},
			ExpressionAttributeValues:           map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: v}},
			ReturnValues:                        types.ReturnValueAllOld,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
	}

	if _, err := update("attribute_not_exists(id)", "PROCESSING"); err != nil {
		t.Fatalf("create: %v", err)
	}
	// A successful update returns the item as it was (the store reads the
	// old fence from it).
	out, err := update("#s = :v OR #s <> :v", "COMPLETED")
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if got, ok := out.Attributes["status"].(*types.AttributeValueMemberS); !ok || got.Value != "PROCESSING" {
		t.Errorf("ALL_OLD of a successful update = %v, want the old item (status PROCESSING)", out.Attributes)
	}

	// A refused one carries no item.
	_, err = update("attribute_not_exists(id)", "PROCESSING")
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("refused update: %v, want ConditionalCheckFailedException", err)
	}
	if len(ccf.Item) != 0 {
		t.Errorf("dynalite returned the old item with a failed condition (%v): the DynamoDB store's GetItem after a refusal is no longer tested on it", ccf.Item)
	}
}

// TestDynaliteHasNoTTL records why NewIdempotencyTable sets none.
func TestDynaliteHasNoTTL(t *testing.T) {
	t.Parallel()
	cfg := dynalite.Config(t)
	table := dynalite.NewIdempotencyTable(t, cfg)
	_, err := dynamodb.NewFromConfig(cfg).UpdateTimeToLive(context.Background(), &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("expiresAt"), Enabled: aws.Bool(true)},
	})
	if err == nil {
		t.Error("dynalite accepted UpdateTimeToLive: NewIdempotencyTable can set TTL on expiresAt now")
	}
}

// TestServersAreApart: each test's server is its own, on its own port.
func TestServersAreApart(t *testing.T) {
	t.Parallel()
	a, b := dynalite.Start(t), dynalite.Start(t)
	if a.URL == b.URL {
		t.Fatalf("two servers on %s", a.URL)
	}
	table := dynalite.NewIdempotencyTable(t, a.Config())
	_, err := dynamodb.NewFromConfig(b.Config()).DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var notFound *types.ResourceNotFoundException
	if !errors.As(err, &notFound) {
		t.Errorf("a table of one server on the other: %v, want ResourceNotFoundException", err)
	}
}
