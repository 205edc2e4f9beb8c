//go:build integration

package sqsonce

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

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
	}{
		{"new", 0, func(i int) string { return fmt.Sprintf("new-%d", i) }, false},
		{"duplicate", 0, func(int) string { return "dup" }, false},
		{"duplicate-cached", 1000, func(int) string { return "dup" }, false},
		{"failure", 0, func(i int) string { return fmt.Sprintf("fail-%d", i) }, true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			d := newLockDynamo(b)
			calls := new(atomic.Int32)
			p, err := NewConsumer(ConsumerConfig{
				Config: Config{
					Store:      dynamostore.New(lockCountingDynamo{AdminAPI: d.api, calls: calls}, d.table),
					KeyPrefix:  "bench",
					LocalCache: c.cache,
					Logger:     lockQuiet,
				},
				Key: KeyFunc(func(m events.SQSMessage) (string, error) { return m.Body, nil }),
			}, func(context.Context, events.SQSMessage) error {
				if c.fail {
					return errors.New("downstream 503")
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
