//go:build integration

package sqsonce

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// BenchmarkRecord handles one record per iteration against DynamoDB on
// moto_server and reports the DynamoDB calls it cost:
//
//	go test -tags integration -run '^$' -bench Record -benchmem ./sqsonce
func BenchmarkRecord(b *testing.B) {
	arn := "arn:aws:sqs:us-east-1:123456789012:orders"
	cases := []struct {
		name  string
		cache int
		// body is the record of iteration i; a fixed one repeats a key.
		body func(i int) string
		fail bool
		// tx: the handler adds a Put of an order item to the completion's
		// transaction (dynamostore.NewTransactional).
		tx bool
	}{
		{"new", 0, func(i int) string { return fmt.Sprintf("new-%d", i) }, false, false},
		{"new-transactional", 0, func(i int) string { return fmt.Sprintf("newtx-%d", i) }, false, true},
		{"duplicate", 0, func(int) string { return "dup" }, false, false},
		{"duplicate-cached", 1000, func(int) string { return "dup" }, false, false},
		{"failure", 0, func(i int) string { return fmt.Sprintf("fail-%d", i) }, true, false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			d := newLockDynamo(b)
			calls := new(atomic.Int32)
			counted := lockCountingDynamo{AdminAPI: d.api, calls: calls}
			st := dynamostore.New(counted, d.table)
			if c.tx {
				st = dynamostore.NewTransactional(lockCountingTxDynamo{counted, d.api.(dynamostore.TxAPI)}, d.table)
			}
			p, err := NewConsumer(ConsumerConfig{
				Config: Config{
					Store:      st,
					KeyPrefix:  "bench",
					LocalCache: c.cache,
					Logger:     lockQuiet,
				},
				Key: KeyFunc(func(m events.SQSMessage) (string, error) { return m.Body, nil }),
			}, func(ctx context.Context, m events.SQSMessage) error {
				if c.fail {
					return errors.New("downstream 503")
				}
				if c.tx {
					return dynamostore.Add(ctx, types.TransactWriteItem{Put: &types.Put{
						TableName: aws.String(d.table),
						Item:      map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "order#" + m.Body}},
					}})
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			handle := func(i int) {
				ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: fmt.Sprint(i), Body: c.body(i), EventSourceARN: arn}}}
				if _, err := p.Handle(context.Background(), ev); err != nil {
					b.Fatal(err)
				}
			}
			handle(-1) // the duplicate cases' first, completing delivery
			before := calls.Load()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				handle(i)
				i++
			}
			b.ReportMetric(float64(calls.Load()-before)/float64(i), "dynamodb-calls/record")
		})
	}
}

// lockCountingTxDynamo is lockCountingDynamo with the transactional
// store's one more call, counted too.
type lockCountingTxDynamo struct {
	lockCountingDynamo
	tx dynamostore.TxAPI
}

func (c lockCountingTxDynamo) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.calls.Add(1)
	return c.tx.TransactWriteItems(ctx, in, o...)
}
