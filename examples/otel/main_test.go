package main

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/sqsoncetest"
)

// How a user checks the counter without AWS or a collector: the Processor
// on sqsoncetest's in-memory store, the counter on the SDK's ManualReader,
// which hands over what was counted when asked.

func TestOutcomesAreCounted(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = provider.Shutdown(ctx) })
	count, err := countOutcomes(provider.Meter("example.com/otel"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := sqsonce.NewConsumer(sqsonce.ConsumerConfig{
		Config: sqsonce.Config{
			Store:     sqsoncetest.NewStore(),
			KeyPrefix: "orders",
			OnOutcome: count,
		},
		Key: sqsonce.KeyFromBody("/orderId"),
	}, fulfil)
	if err != nil {
		t.Fatal(err)
	}

	for _, msg := range []events.SQSMessage{
		{MessageId: "m-1", Body: `{"orderId":"A-1","amountCents":1250}`}, // Processed
		{MessageId: "m-2", Body: `{"orderId":"A-1","amountCents":1250}`}, // Duplicate: sent again
		{MessageId: "m-3", Body: `{"amountCents":1250}`},                 // Failed, no-key
		{MessageId: "m-4", Body: `{"orderId":"A-2","amountCents":-1}`},   // Failed, handler-error
	} {
		// One record a batch: the outcome of each is then certain (two
		// records with one key in a batch may meet in progress).
		if _, err := p.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{msg}}); err != nil {
			t.Fatalf("Handle(%s): %v", msg.MessageId, err)
		}
	}
	refund := func(context.Context) error { return nil }
	if err := p.Do(ctx, "refund-A-1", refund); err != nil { // Processed
		t.Fatalf("Do: %v", err)
	}
	if err := p.Do(ctx, "refund-A-1", refund); !errors.Is(err, sqsonce.ErrDuplicate) { // Duplicate
		t.Fatalf("Do again: %v, want ErrDuplicate", err)
	}

	// The series by their attributes, as the SDK encodes them (sorted by
	// name): kind, and reason where the Outcome has one; never the key.
	want := map[string]int64{
		"kind=" + string(sqsonce.KindProcessed):                                                2,
		"kind=" + string(sqsonce.KindDuplicate):                                                2,
		"kind=" + string(sqsonce.KindFailed) + ",reason=" + string(sqsonce.ReasonNoKey):        1,
		"kind=" + string(sqsonce.KindFailed) + ",reason=" + string(sqsonce.ReasonHandlerError): 1,
	}
	got := collect(t, reader)
	for series, n := range want {
		if got[series] != n {
			t.Errorf("sqsonce.outcomes{%s} = %d, want %d", series, got[series], n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("sqsonce.outcomes has the series %v, want %v", got, want)
	}
}

// collect reads the counter sqsonce.outcomes from reader: its value by
// attribute set, encoded. It fails the test unless the counter is a
// monotonic sum, as a counter is exported.
func collect(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "sqsonce.outcomes" {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok || !sum.IsMonotonic {
				t.Fatalf("sqsonce.outcomes is a %T (monotonic: %t), want a monotonic Sum[int64]", m.Data, ok && sum.IsMonotonic)
			}
			got := map[string]int64{}
			for _, dp := range sum.DataPoints {
				got[dp.Attributes.Encoded(attribute.DefaultEncoder())] = dp.Value
			}
			return got
		}
	}
	t.Fatal("no metric sqsonce.outcomes was collected")
	return nil
}
