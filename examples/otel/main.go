// Command otel is a Lambda function that handles each order from an SQS
// queue once per order id, as examples/orders does, and counts what
// happened to every record with an OpenTelemetry counter fed by
// sqsonce's Config.OnOutcome: processed, duplicate, failed and why.
//
// The environment configures sqsonce as it does the stack's processor
// (sqsonce.ConfigFromEnv, dynamostore.FromEnv). The counter is exported on standard output here
// (stdoutmetric), so the example needs no collector; in your function,
// put your exporter in its place (an OTLP one, to the ADOT Lambda layer's
// collector, say): the counter and the hook stay as they are.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

func main() {
	ctx := context.Background()
	handle, err := setup(ctx)
	if err != nil {
		// Exiting fails the init phase, so no order is handled uncounted
		// or unguarded.
		slog.Error("invalid configuration", "error", err)
		os.Exit(2)
	}
	lambda.Start(handle)
}

// setup builds the meter provider, the counter and the Processor, and
// returns the function Lambda calls for each batch.
func setup(ctx context.Context) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	exporter, err := stdoutmetric.New()
	if err != nil {
		return nil, err
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exporter)))
	count, err := countOutcomes(provider.Meter("example.com/otel"))
	if err != nil {
		return nil, err
	}
	cfg, err := sqsonce.ConfigFromEnv(os.LookupEnv)
	if err != nil {
		return nil, err
	}
	cfg.OnOutcome = count
	if cfg.AWS, err = config.LoadDefaultConfig(ctx); err != nil {
		return nil, fmt.Errorf("load the AWS configuration: %w", err)
	}
	if cfg.Store, err = dynamostore.FromEnv(os.LookupEnv, cfg.AWS); err != nil {
		return nil, err
	}
	p, err := sqsonce.NewConsumer(cfg, fulfil)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		resp, err := p.Handle(ctx, ev)
		// Lambda freezes the process once this returns, for minutes or
		// for good: a periodic reader's next export may never come, so
		// the batch's counts are exported now.
		if ferr := provider.ForceFlush(ctx); ferr != nil {
			slog.WarnContext(ctx, "outcome metrics not exported", "error", ferr)
		}
		return resp, err
	}, nil
}

// countOutcomes returns a Config.OnOutcome that adds one to the counter
// sqsonce.outcomes of meter for each Outcome, with the attribute kind
// (Outcome.Kind: Processed, Duplicate, Failed, ...) and, when the Outcome
// has one, reason (why it failed, or was forwarded to the operator queue).
// The key and the message id are left out on purpose: one time series per
// order would make the metric as large as the table.
func countOutcomes(meter metric.Meter) (func(context.Context, sqsonce.Outcome), error) {
	counter, err := meter.Int64Counter("sqsonce.outcomes",
		metric.WithDescription("Records and Do calls by what happened to them (sqsonce.Outcome)"),
		metric.WithUnit("{outcome}"))
	if err != nil {
		return nil, fmt.Errorf("create the outcome counter: %w", err)
	}
	return func(ctx context.Context, o sqsonce.Outcome) {
		attrs := []attribute.KeyValue{attribute.String("kind", string(o.Kind))}
		if o.Reason != "" {
			attrs = append(attrs, attribute.String("reason", string(o.Reason)))
		}
		counter.Add(ctx, 1, metric.WithAttributes(attrs...))
	}, nil
}

// order is the message body the producer sends.
type order struct {
	OrderID     string `json:"orderId"`
	AmountCents int64  `json:"amountCents"`
}

// fulfil runs at most once per order id (IDEMPOTENCY_KEY=body:/orderId)
// within the dedupe window.
func fulfil(ctx context.Context, msg events.SQSMessage) error {
	var o order
	if err := json.Unmarshal([]byte(msg.Body), &o); err != nil {
		return sqsonce.Permanent(fmt.Errorf("order body: %w", err))
	}
	if o.AmountCents < 0 {
		// Stands in for an outage of the fulfilment service: a plain
		// error, so SQS delivers the order again later; counted as Failed
		// with reason handler-error.
		return errors.New("fulfilment service unavailable")
	}
	slog.InfoContext(ctx, "fulfilling", "orderId", o.OrderID, "fence", sqsonce.Fence(ctx))
	return nil
}
