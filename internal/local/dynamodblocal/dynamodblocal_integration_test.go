//go:build integration

package dynamodblocal_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/logging"

	"github.com/sqs-once/sqs-once/internal/local/dynamodblocal"
)

// TestAnswers pins down the answers the DynamoDB store's tests on
// DynamoDB Local rely on, and that moto_server or dynalite do not give: a
// TransactWriteItems repeated with its ClientRequestToken succeeds and
// applies nothing more; the same token with other writes fails with
// IdempotentParameterMismatchException; a refused transaction names each
// write's reason and carries the old item the refused one asked for; a
// refused UpdateItem carries the old item (ReturnValuesOnConditionCheckFailure).
func TestAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := dynamodblocal.Shared(t)
	if srv.Engine != dynamodblocal.EngineVersion {
		t.Errorf("the server is DynamoDB Local %q, want %s (the release %s@%s ships)", srv.Engine, dynamodblocal.EngineVersion, dynamodblocal.Package, dynamodblocal.Version)
	}
	cfg := srv.Config()
	client := dynamodblocal.NewClient(cfg)
	table := dynamodblocal.NewTable(t, cfg, "counters", "name")
	key := func(name string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"name": &types.AttributeValueMemberS{Value: name}}
	}
	add := func(name string) types.TransactWriteItem {
		return types.TransactWriteItem{Update: &types.Update{
			TableName: aws.String(table), Key: key(name),
			UpdateExpression:          aws.String("ADD n :one"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
		}}
	}
	count := func(name string) string {
		t.Helper()
		out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key(name), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		n, _ := out.Item["n"].(*types.AttributeValueMemberN)
		if n == nil {
			return "none"
		}
		return n.Value
	}
	tx := func(token string, items ...types.TransactWriteItem) error {
		_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items, ClientRequestToken: aws.String(token)})
		return err
	}

	for i := range 2 {
		if err := tx("token-a", add("a")); err != nil {
			t.Fatalf("transaction %d with token-a: %v", i+1, err)
		}
	}
	if n := count("a"); n != "1" {
		t.Errorf("counter after a transaction and its repeat under one token: %s, want 1", n)
	}
	err := tx("token-a", add("b"))
	var mismatch *types.IdempotentParameterMismatchException
	if !errors.As(err, &mismatch) {
		t.Errorf("other writes under token-a: %v, want IdempotentParameterMismatchException", err)
	}
	if n := count("b"); n != "none" {
		t.Errorf("counter b after the refused transaction: %s, want none", n)
	}

	refused := add("a")
	refused.Update.ConditionExpression = aws.String("n = :zero")
	refused.Update.ExpressionAttributeValues[":zero"] = &types.AttributeValueMemberN{Value: "0"}
	refused.Update.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	err = tx("token-c", add("c"), refused)
	var canceled *types.TransactionCanceledException
	if !errors.As(err, &canceled) {
		t.Fatalf("transaction with a failing condition: %v, want TransactionCanceledException", err)
	}
	r := canceled.CancellationReasons
	if len(r) != 2 || aws.ToString(r[0].Code) != "None" || aws.ToString(r[1].Code) != "ConditionalCheckFailed" {
		t.Fatalf("cancellation reasons %+v, want None, ConditionalCheckFailed", r)
	}
	if n, _ := r[1].Item["n"].(*types.AttributeValueMemberN); n == nil || n.Value != "1" {
		t.Errorf("the refused write's reason carries %v, want the old item (n = 1)", r[1].Item)
	}

	_, err = client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: key("a"),
		ConditionExpression:                 aws.String("attribute_not_exists(n)"),
		UpdateExpression:                    aws.String("SET n = :zero"),
		ExpressionAttributeValues:           map[string]types.AttributeValue{":zero": &types.AttributeValueMemberN{Value: "0"}},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("refused update: %v, want ConditionalCheckFailedException", err)
	}
	if n, _ := ccf.Item["n"].(*types.AttributeValueMemberN); n == nil || n.Value != "1" {
		t.Errorf("refused update carries %v, want the old item (n = 1)", ccf.Item)
	}
}

// TestOneDatabaseForEveryRegion: a client of another region and other
// credentials sees the tables of Config's (-sharedDb), so a test may build
// its configuration as it likes.
func TestOneDatabaseForEveryRegion(t *testing.T) {
	t.Parallel()
	cfg := dynamodblocal.Config(t)
	table := dynamodblocal.NewIdempotencyTable(t, cfg)
	other := cfg.Copy()
	other.Region = "eu-west-1"
	other.Credentials = credentials.NewStaticCredentialsProvider("other", "other", "")
	if _, err := dynamodblocal.NewClient(other).DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(table)}); err != nil {
		t.Errorf("the table from region eu-west-1 with other credentials: %v", err)
	}
}

// TestChecksumWarningOff: DynamoDB Local's error answers carry a CRC32 of
// 0, which the SDK's check reports as a warning ("response did not match
// expected checksum") through the client's logger; a client built with
// ClientOptions reports nothing. If the plain client stops warning, a
// release fixed the checksum and ClientOptions may go.
func TestChecksumWarningOff(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		opts []func(*dynamodb.Options)
		warn bool
	}{
		{"plain client", nil, true},
		{"with ClientOptions", []func(*dynamodb.Options){dynamodblocal.ClientOptions}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var logged []string
			cfg := dynamodblocal.Config(t)
			cfg.Logger = logging.LoggerFunc(func(class logging.Classification, format string, v ...any) {
				mu.Lock()
				logged = append(logged, fmt.Sprintf(string(class)+" "+format, v...))
				mu.Unlock()
			})
			_, err := dynamodb.NewFromConfig(cfg, c.opts...).DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String("no-such-table")})
			if !errors.As(err, new(*types.ResourceNotFoundException)) {
				t.Fatalf("DescribeTable of a missing table: %v, want ResourceNotFoundException", err)
			}
			mu.Lock()
			defer mu.Unlock()
			warned := strings.Contains(strings.Join(logged, "\n"), "did not match expected checksum")
			if warned != c.warn {
				t.Errorf("the SDK logged %q; want a checksum warning: %t", logged, c.warn)
			}
		})
	}
}
