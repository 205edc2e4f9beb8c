package sqsonce_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/sqsoncetest"
)

// Metrics: each invocation writes CloudWatch Embedded Metric Format lines
// (in a Lambda function, to os.Stdout, which CloudWatch Logs reads). Here
// they go to a buffer and are added up: a message handled, then the same
// order again, is one Processed and one Duplicate.
func ExampleConfig_metrics() {
	ctx := context.Background()
	var emf bytes.Buffer
	p, err := sqsonce.NewConsumer(sqsonce.ConsumerConfig{
		Config: sqsonce.Config{
			Store:     sqsoncetest.NewStore(), // in memory, for the example
			KeyPrefix: "metrics-example",
			Logger:    slog.New(slog.DiscardHandler),
		},
		Key:          sqsonce.KeyFromBody("/orderId"),
		Metrics:      &emf,
		FunctionName: "orders-processor",
	}, func(context.Context, events.SQSMessage) error { return nil })
	if err != nil {
		log.Fatal(err)
	}
	for _, id := range []string{"m-1", "m-2"} {
		ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: id, Body: `{"orderId":"C-3"}`,
			EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders"}}}
		if _, err := p.Handle(ctx, ev); err != nil {
			log.Fatal(err)
		}
	}
	sums := map[string]float64{}
	lines := bufio.NewScanner(&emf)
	for lines.Scan() {
		var doc map[string]any
		if err := json.Unmarshal(lines.Bytes(), &doc); err != nil {
			log.Fatal(err)
		}
		if doc["FunctionName"] != "orders-processor" {
			log.Fatalf("metrics of function %v", doc["FunctionName"])
		}
		if _, byReason := doc["Reason"]; byReason {
			continue // the same counts again, per reason
		}
		for _, name := range []string{"Processed", "Duplicate"} {
			if v, ok := doc[name].(float64); ok {
				sums[name] += v
			}
		}
	}
	fmt.Printf("Processed %g, Duplicate %g\n", sums["Processed"], sums["Duplicate"])
	// Output: Processed 1, Duplicate 1
}
