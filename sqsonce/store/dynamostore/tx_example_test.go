package dynamostore_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
	"github.com/sqs-once/sqs-once/sqsonce/store/memstore"
)

// A work that writes an order row in one transaction with its key's
// completion. In production the processor's store is
// dynamostore.NewTransactional on a *dynamodb.Client; a test runs the same
// function on the in-memory store, with no AWS, and reads what it wrote,
// and whether it committed, with Committed.
func ExampleAdd() {
	placeOrder := func(ctx context.Context) error {
		return dynamostore.Add(ctx, types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String("orders"),
			Item: map[string]types.AttributeValue{
				"orderId": &types.AttributeValueMemberS{Value: "order-7"},
				"total":   &types.AttributeValueMemberN{Value: "42"},
			},
			// A second order of the same id is the work's failure.
			ConditionExpression: aws.String("attribute_not_exists(orderId)"),
		}})
	}

	ctx := context.Background()
	mem := memstore.New()
	p, err := sqsonce.New(sqsonce.Config{Store: mem, KeyPrefix: "orders", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(p.Do(ctx, "order-7", placeOrder))
	for id, writes := range mem.Committed() {
		for _, w := range writes {
			put := w.(types.TransactWriteItem).Put
			fmt.Println(id, "committed a Put to", aws.ToString(put.TableName), "of", put.Item["orderId"].(*types.AttributeValueMemberS).Value)
		}
	}
	fmt.Println("completed:", mem.Records()["orders#order-7"].Status)

	// Outside sqsonce there is no transaction to add to.
	fmt.Println(dynamostore.Add(ctx, types.TransactWriteItem{}) != nil)
	// Output:
	// <nil>
	// orders#order-7 committed a Put to orders of order-7
	// completed: COMPLETED
	// true
}
