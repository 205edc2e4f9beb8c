package processor_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/processor"
)

// BenchmarkStandardBatch measures a batch of 10 records whose business handler
// takes 200 ms, against moto_server. Run sequentially it would take over 2 s a
// batch; concurrently it takes about 200 ms plus the table round trips:
//
//	go test -run '^$' -bench StandardBatch ./internal/processor
func BenchmarkStandardBatch(b *testing.B) {
	bundle := setup(b)
	bundle.business.hook = func(context.Context, events.SQSMessage) { time.Sleep(200 * time.Millisecond) }
	for i := 0; b.Loop(); i++ {
		var records []events.SQSMessage
		for j := range 10 {
			records = append(records, record(fmt.Sprintf("b%d-%d", i, j), "x"))
		}
		if _, err := bundle.handler.Handle(context.Background(), events.SQSEvent{Records: records}); err != nil {
			b.Fatal(err)
		}
	}
}

// scriptedDynamo answers the protocol's calls without a table: every write
// succeeds, or every acquire is refused by a completed record. It measures
// the processor's own cost, without the SDK's wire work.
type scriptedDynamo struct{ completed bool }

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
//	go test -run '^$' -bench RecordInMemory -benchmem ./internal/processor
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
			h := mustNew(b, processor.Config{Table: "t", KeyPrefix: "p"}, processor.Deps{
				DynamoDB: scriptedDynamo{completed: c.completed},
				SQS:      &visibilityRecorder{},
				Business: func(context.Context, events.SQSMessage) error { return c.err },
				Logger:   slog.New(slog.DiscardHandler),
			})
			ev := events.SQSEvent{Records: []events.SQSMessage{record("m-1", "x")}}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := h.Handle(context.Background(), ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
