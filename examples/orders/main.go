// Command orders is a Lambda function that charges each order from an SQS
// queue once per order id, however often the order is delivered or re-sent:
// package sqsonce runs charge under a lock per order id in a DynamoDB table.
// The environment configures it (template.yaml sets every variable).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

func main() {
	slog.SetDefault(lambdacontext.NewLogger()) // JSON lines with the request id
	p, err := newProcessor(context.Background())
	if err != nil {
		// Exiting fails the init phase, so no order is handled unguarded.
		slog.Error("invalid configuration", "error", err)
		os.Exit(2)
	}
	lambda.Start(p.Handle)
}

// newProcessor builds the processor from the environment: the DynamoDB
// store on IDEMPOTENCY_TABLE, the rest from the variables sqsonce reads.
func newProcessor(ctx context.Context) (*sqsonce.Processor, error) {
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load the AWS configuration: %w", err)
	}
	store, err := dynamostore.FromEnv(os.LookupEnv, awsCfg)
	if err != nil {
		return nil, err
	}
	return sqsonce.FromEnv(os.LookupEnv, sqsonce.ConsumerConfig{Config: sqsonce.Config{Store: store}, AWS: awsCfg}, charge)
}

// order is the message body the producer sends.
type order struct {
	OrderID     string `json:"orderId"`
	AmountCents int64  `json:"amountCents"`
}

// charge runs at most once per order id (IDEMPOTENCY_KEY=body:/orderId)
// within the dedupe window. An error has the message retried; Permanent
// sends it to the operator queue at once, since no retry fixes its body.
func charge(ctx context.Context, msg events.SQSMessage) error {
	var o order
	if err := json.Unmarshal([]byte(msg.Body), &o); err != nil {
		return sqsonce.Permanent(fmt.Errorf("order body: %w", err))
	}
	key, fence := sqsonce.Key(ctx), sqsonce.Fence(ctx)
	slog.InfoContext(ctx, "charging", "orderId", o.OrderID, "amountCents", o.AmountCents, "key", key, "fence", fence)
	return pay(ctx, key, o.AmountCents)
}

// pay stands in for your payment provider's API: the real call goes here,
// with idempotencyKey as the provider's idempotency key (an
// Idempotency-Key header, say). sqsonce alone cannot stop a second charge
// when the process dies between the charge and its completion record; the
// provider, seeing the same key again, can.
func pay(ctx context.Context, idempotencyKey string, amountCents int64) error {
	_, _ = ctx, idempotencyKey // used by the real call
	if amountCents < 0 {
		// The simulated outage, so the example shows a retried failure:
		// a plain error, and SQS delivers the order again later.
		return fmt.Errorf("payment provider unavailable (simulated for amountCents %d)", amountCents)
	}
	return nil
}
