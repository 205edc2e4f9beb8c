package sqsonce_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/sqsonce"
)

// BenchmarkRecord handles one record per iteration against moto_server and
// reports the DynamoDB calls it cost, counted on the wire:
//
//	make bench   (or: go test -run '^$' -bench Record -benchmem ./sqsonce)
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
			bundle := setup(b)
			bundle.cfg.LocalCache = c.cache
			bundle.cfg.KeyFunc = func(m events.SQSMessage) (string, error) { return m.Body, nil }
			p, err := sqsonce.New(bundle.cfg, func(context.Context, events.SQSMessage) error {
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
			before := bundle.calls()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				handle(i)
				i++
			}
			b.ReportMetric(float64(bundle.calls()-before)/float64(i), "dynamodb-calls/record")
		})
	}
}

// BenchmarkBatchOf10 is a batch of ten records whose handler takes 200 ms:
// one after the other they would take two seconds.
func BenchmarkBatchOf10(b *testing.B) {
	bundle := setup(b)
	p, err := sqsonce.New(bundle.cfg, func(context.Context, events.SQSMessage) error {
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
