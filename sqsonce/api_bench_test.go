package sqsonce

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/sqsonce/sqsoncetest"
)

// BenchmarkBatchOf10 is a batch of ten records whose handler takes 200 ms:
// one after the other they would take two seconds. The store is in memory:
// what is measured is the batch's concurrency.
func BenchmarkBatchOf10(b *testing.B) {
	p, err := NewConsumer(ConsumerConfig{Config: Config{Store: sqsoncetest.NewStore(), KeyPrefix: "bench", Logger: lockQuiet}}, func(context.Context, events.SQSMessage) error {
		time.Sleep(200 * time.Millisecond) // the handler's own work, not a wait for the code under test
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		var ev events.SQSEvent
		for j := range 10 {
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("b%d-%d", i, j), EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders"})
		}
		if _, err := p.Handle(context.Background(), ev); err != nil {
			b.Fatal(err)
		}
	}
}
