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

// printSender prints what it sends: a test's Sender. On AWS,
// targets.NewSender(awsCfg) sends with SQS and SNS.
type printSender struct{}

func (printSender) Send(_ context.Context, msgs []sqsonce.Outgoing) []error {
	for _, m := range msgs {
		fmt.Printf("send to %s: %s (emit id %d hex digits)\n", m.To, m.Body, len(m.ID))
	}
	return make([]error, len(msgs))
}

// A work that writes an order and emits OrderAccepted to the next queue:
// the message commits with the key's completion and is sent after it,
// once; a duplicate sends nothing. A downstream sqsonce consumer keyed on
// sqsonce.AttrEmitID handles it once however often it was sent.
func ExampleEmit() {
	mem := memstore.New()
	p, err := sqsonce.New(sqsonce.Config{
		Store:     mem,
		KeyPrefix: "orders",
		Sender:    printSender{},
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	accept := func(ctx context.Context) error {
		return sqsonce.Emit(ctx, sqsonce.Message{
			To:   "sqs:https://sqs.us-east-1.amazonaws.com/123456789012/shipments",
			Body: `{"type":"OrderAccepted","order":"A-1"}`,
		})
	}
	fmt.Println(p.Do(context.Background(), "A-1", accept))
	err = p.Do(context.Background(), "A-1", accept)
	fmt.Println(errors.Is(err, sqsonce.ErrDuplicate))
	// Output:
	// send to sqs:https://sqs.us-east-1.amazonaws.com/123456789012/shipments: {"type":"OrderAccepted","order":"A-1"} (emit id 32 hex digits)
	// <nil>
	// true
}
