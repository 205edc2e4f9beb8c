//go:build integration

package sqsonce

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// TestPermanentEffectGoesToTheOperatorQueueAtOnce: on moto_server, a
// handler whose transactional write is a ConditionCheck that fails at the
// commit (the order it confirms does not exist: no retry brings it). With
// Config.PermanentEffect saying so, the record goes to the operator queue
// with reason permanent-error on its first delivery and the handler runs
// once; without it, the record is retried (a batch item failure) and runs
// again on the next delivery, as before.
func TestPermanentEffectGoesToTheOperatorQueueAtOnce(t *testing.T) {
	t.Parallel()
	for _, marked := range []bool{true, false} {
		name := map[bool]string{true: "marked permanent", false: "unmarked"}[marked]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := procSetup(t, dynamoBackend)
			operator := b.queues.newQueue(t, false, nil)
			cfg := b.cfg
			cfg.OperatorQueueURL = operator
			cfg.Store = dynamostore.NewTransactional(motoserver.Atomic(dynamodb.NewFromConfig(b.aws)), b.table)
			var asked atomic.Int32
			if marked {
				cfg.PermanentEffect = func(err *store.EffectError) bool {
					asked.Add(1)
					// The store's detail is there to decide on: which
					// write's condition failed.
					var canceled *ddbtypes.TransactionCanceledException
					return errors.As(err, &canceled) && len(canceled.CancellationReasons) > 0 &&
						aws.ToString(canceled.CancellationReasons[0].Code) == "ConditionalCheckFailed"
				}
			}
			var runs atomic.Int32
			p := mustProcessor(t, cfg, func(ctx context.Context, msg events.SQSMessage) error {
				runs.Add(1)
				return dynamostore.Add(ctx, ddbtypes.TransactWriteItem{ConditionCheck: &ddbtypes.ConditionCheck{
					TableName:           aws.String(b.table),
					Key:                 map[string]ddbtypes.AttributeValue{dynamostore.AttrID: &ddbtypes.AttributeValueMemberS{Value: "orders#" + msg.Body}},
					ConditionExpression: aws.String("attribute_exists(id)"),
				}})
			}, b.sqs)
			_, ev := receiveEvent(t, b, nil, "A-404")
			failed := handleWith(t, p, ev.Records...)
			if marked {
				if len(failed) != 0 {
					t.Fatalf("failed %v: a record refused for good goes to the operator queue and is deleted", failed)
				}
				got := b.queues.received(t, operator, 1)
				if len(got) != 1 || reasonOf(got[0]) != ReasonPermanent || aws.ToString(got[0].Body) != "A-404" {
					t.Fatalf("operator queue holds %d messages %v; want the record, with reason %s", len(got), got, ReasonPermanent)
				}
				if n := asked.Load(); n != 1 {
					t.Errorf("PermanentEffect asked %d times, want once", n)
				}
				if n := runs.Load(); n != 1 {
					t.Errorf("the handler ran %d times, want once: no retry", n)
				}
				rec, err := cfg.Store.Read(context.Background(), store.RecordID(cfg.KeyPrefix, ev.Records[0].MessageId))
				if err != nil || rec.Status != store.StatusReleased {
					t.Errorf("the record is %v (%v); want RELEASED: the lock is given up", rec, err)
				}
				return
			}
			if len(failed) != 1 {
				t.Fatalf("failed %v; want the record retried (an unmarked refusal is the work's retryable failure)", failed)
			}
			if got := b.queues.received(t, operator, 0); len(got) != 0 {
				t.Errorf("operator queue holds %d messages; want none", len(got))
			}
			if failed := handleWith(t, p, ev.Records...); len(failed) != 1 || runs.Load() != 2 {
				t.Errorf("the redelivery: failed %v, handler runs %d; want retried again and run twice in all", failed, runs.Load())
			}
		})
	}
}
