package sqsonce_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
	"github.com/sqs-once/sqs-once/sqsonce/store/memstore"
)

// errCancelled stands in, on the in-memory store, for the detail DynamoDB
// gives of a failed ConditionCheck (a *types.TransactionCanceledException
// whose CancellationReasons name the write).
var errCancelled = errors.New("order A-1 is cancelled")

// A refusal by a condition of the work's own writes that no retry changes
// (the order was cancelled) marked permanent: it arises at the commit,
// after the work returned, so Config.PermanentEffect decides. Do's error
// is then IsPermanent (Handle sends the record to the operator queue at
// once), and errors.As still finds the *store.EffectError and its detail.
// On DynamoDB the function would test the cancellation reason of its
// ConditionCheck instead:
//
//	var canceled *types.TransactionCanceledException
//	return errors.As(err, &canceled) && aws.ToString(canceled.CancellationReasons[0].Code) == "ConditionalCheckFailed"
func ExampleConfig_permanentEffect() {
	mem := memstore.New()
	p, err := sqsonce.New(sqsonce.Config{
		Store:     mem,
		KeyPrefix: "orders",
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		PermanentEffect: func(err *store.EffectError) bool {
			return errors.Is(err, errCancelled)
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	err = p.Do(context.Background(), "A-1", func(ctx context.Context) error {
		if err := dynamostore.Add(ctx, types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String("shipments"),
			Item:      map[string]types.AttributeValue{"orderId": &types.AttributeValueMemberS{Value: "A-1"}},
		}}); err != nil {
			return err
		}
		// The condition that fails at the commit, as DynamoDB's would.
		return store.TxFrom(ctx).(*memstore.Tx).Add(memstore.FailingCondition{Err: errCancelled})
	})
	var refused *store.EffectError
	fmt.Println(sqsonce.IsPermanent(err), errors.As(err, &refused), len(mem.Committed()))
	// Output:
	// true true 0
}
