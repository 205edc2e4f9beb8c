package main

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/sqsoncetest"
)

// How a user of sqsonce tests a function without AWS: the handler alone,
// with the key and fence a Processor would give it; and the whole
// Processor, on sqsoncetest's in-memory store.

func TestChargeReadsTheKeyAndRefusesABadBody(t *testing.T) {
	ctx := sqsoncetest.Context(context.Background(), "A-1001", 7)
	if err := charge(ctx, events.SQSMessage{Body: `{"orderId":"A-1001","amountCents":1250}`}); err != nil {
		t.Fatalf("charge: %v", err)
	}
	err := charge(ctx, events.SQSMessage{Body: `{"orderId":"A-1001","amountCents":"twelve"}`})
	if !sqsonce.IsPermanent(err) {
		t.Fatalf("a body that does not decode: %v, want a Permanent error", err)
	}
}

func TestAnOrderIsChargedOnce(t *testing.T) {
	charged := 0
	p, err := sqsonce.NewConsumer(sqsonce.ConsumerConfig{
		Config: sqsonce.Config{
			Store:     sqsoncetest.NewStore(),
			KeyPrefix: "orders",
		},
		Key: sqsonce.KeyFromBody("/orderId"),
	}, func(ctx context.Context, msg events.SQSMessage) error {
		charged++
		return charge(ctx, msg)
	})
	if err != nil {
		t.Fatal(err)
	}
	order := events.SQSMessage{MessageId: "m-1", Body: `{"orderId":"A-1001","amountCents":1250}`}
	resent := events.SQSMessage{MessageId: "m-2", Body: order.Body} // the producer sent it again
	for _, msg := range []events.SQSMessage{order, resent, order} {
		resp, err := p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg}})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("Handle(%s) = %v, %v; want no failure", msg.MessageId, resp, err)
		}
	}
	if charged != 1 {
		t.Errorf("charged %d times, want once", charged)
	}
	if err := p.Do(context.Background(), "A-1001", func(context.Context) error { return nil }); !errors.Is(err, sqsonce.ErrDuplicate) {
		t.Errorf("Do on the charged order id: %v, want ErrDuplicate", err)
	}
}
