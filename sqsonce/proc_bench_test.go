package sqsonce

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// BenchmarkStandardBatch measures a batch of 10 records whose handler takes
// 200 ms, on each store (DynamoDB on moto_server with the integration tag).
// Run sequentially it would take over 2 s a batch; concurrently it takes
// about 200 ms plus the store's round trips:
//
//	go test -run '^$' -bench StandardBatch -tags integration ./sqsonce
func BenchmarkStandardBatch(b *testing.B) {
	for _, be := range procBackends {
		b.Run(be.name, func(b *testing.B) {
			bundle := procSetup(b, be)
			bundle.handler.hook = func(context.Context, events.SQSMessage) { time.Sleep(200 * time.Millisecond) }
			for i := 0; b.Loop(); i++ {
				var records []events.SQSMessage
				for j := range 10 {
					records = append(records, procRecord(fmt.Sprintf("b%d-%d", i, j), "x"))
				}
				if _, err := bundle.processor.Handle(context.Background(), events.SQSEvent{Records: records}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// scriptedDynamo answers the protocol's calls without a table: every write
// succeeds, or every acquire is refused by a completed record. It measures
// the processor's and the DynamoDB store's own cost, without the SDK's wire
// work.
type scriptedDynamo struct {
	dynamostore.AdminAPI // GetItem, DeleteItem, Scan: never called
	completed            bool
}

var completedItem = map[string]ddbtypes.AttributeValue{
	"status":    &ddbtypes.AttributeValueMemberS{Value: "COMPLETED"},
	"expiresAt": &ddbtypes.AttributeValueMemberN{Value: "99999999999"},
}

func (s scriptedDynamo) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if s.completed && in.ReturnValues == ddbtypes.ReturnValueAllOld {
		return nil, &ddbtypes.ConditionalCheckFailedException{Item: completedItem}
	}
	return &dynamodb.UpdateItemOutput{}, nil
}

// BenchmarkRecordInMemory is one record's processing with the table
// answered in memory: the allocations are the processor's own.
//
//	go test -run '^$' -bench RecordInMemory -benchmem ./sqsonce
func BenchmarkRecordInMemory(b *testing.B) {
	cases := []struct {
		name      string
		completed bool
		err       error
	}{
		{"new", false, nil},
		{"duplicate", true, nil},
		{"failure", false, errors.New("downstream 503")},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			p, err := NewConsumer(ConsumerConfig{
				Config: Config{
					Store:     dynamostore.New(scriptedDynamo{completed: c.completed}, "t"),
					KeyPrefix: "p",
					Logger:    discardLogger,
				},
			}, func(context.Context, events.SQSMessage) error { return c.err })
			if err != nil {
				b.Fatal(err)
			}
			ev := events.SQSEvent{Records: []events.SQSMessage{procRecord("m-1", "x")}}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Handle(context.Background(), ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
