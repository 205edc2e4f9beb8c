package sqsonce_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"sync"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/sqsoncetest"
)

// An SQS consumer whose side effect runs once per order, however often the
// order is delivered. In a Lambda function, FromEnv builds the same
// Processor from the environment, its store the DynamoDB table
// IDEMPOTENCY_TABLE names, and lambda.Start(p.Handle) serves it; here
// sqsoncetest's in-memory store stands in for the table.
func ExampleNewConsumer() {
	ctx := context.Background()
	p, err := sqsonce.NewConsumer(sqsonce.ConsumerConfig{
		Config: sqsonce.Config{
			Store:     sqsoncetest.NewStore(), // or dynamostore.New(...): a DynamoDB table
			KeyPrefix: "shipping",
			Logger:    slog.New(slog.DiscardHandler),
		},
		Key:            sqsonce.KeyFromBody("/orderId"), // a producer's re-send is a duplicate too
		MaxConcurrency: 1,                               // in order, for a predictable example
	}, func(ctx context.Context, msg events.SQSMessage) error {
		fmt.Println("shipping order", sqsonce.Key(ctx))
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Two deliveries of one order, as SQS's at-least-once delivery makes.
	resp, err := p.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1", Body: `{"orderId":"A-1"}`, EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders"},
		{MessageId: "m-2", Body: `{"orderId":"A-1"}`, EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders"},
	}})
	fmt.Println("records to retry:", len(resp.BatchItemFailures), err)
	// Output:
	// shipping order A-1
	// records to retry: 0 <nil>
}

// Do guards any function, not only SQS records: here a charge that an API
// handler or a cron job may call twice, or call while another call for the
// same invoice still runs.
func ExampleProcessor_Do() {
	ctx := context.Background()
	p, err := sqsonce.New(sqsonce.Config{Store: sqsoncetest.NewStore(), KeyPrefix: "billing", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	charge := func(ctx context.Context) error {
		fmt.Println("charging", sqsonce.Key(ctx))
		return nil
	}
	fmt.Println(p.Do(ctx, "invoice-42", charge))
	err = p.Do(ctx, "invoice-42", charge)
	fmt.Println("duplicate:", errors.Is(err, sqsonce.ErrDuplicate))

	// A call while another holds the key does not run: the holder may
	// still succeed (a retry later finds a duplicate) or fail (a retry
	// later runs).
	_ = p.Do(ctx, "invoice-43", func(ctx context.Context) error {
		err := p.Do(ctx, "invoice-43", charge)
		fmt.Println("in progress:", errors.Is(err, sqsonce.ErrInProgress))
		return nil
	})
	// Output:
	// charging invoice-42
	// <nil>
	// duplicate: true
	// in progress: true
}

// A failed function releases its key: the next call runs it again.
func ExampleProcessor_Do_retry() {
	ctx := context.Background()
	p, err := sqsonce.New(sqsonce.Config{Store: sqsoncetest.NewStore(), KeyPrefix: "mailer", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	attempts := 0
	send := func(context.Context) error {
		attempts++
		if attempts == 1 {
			return errors.New("smtp: 451 try again later")
		}
		return nil
	}
	fmt.Println(p.Do(ctx, "welcome-mail-7", send))
	fmt.Println(p.Do(ctx, "welcome-mail-7", send))
	fmt.Println("attempts:", attempts)
	// Output:
	// smtp: 451 try again later
	// <nil>
	// attempts: 2
}

// KeyFromBody keys a record by a member of its JSON body, so that a
// producer's second send of an order is a duplicate, whatever its message
// id. A record without the member has no key: it never runs, and is
// retried until it reaches the dead-letter queue.
func ExampleKeyFromBody() {
	p, err := sqsonce.NewConsumer(sqsonce.ConsumerConfig{
		Config: sqsonce.Config{
			Store:     sqsoncetest.NewStore(),
			KeyPrefix: "orders",
			Logger:    slog.New(slog.DiscardHandler),
		},
		Key:            sqsonce.KeyFromBody("/order/id"),
		MaxConcurrency: 1, // in order, for a predictable example
	}, func(ctx context.Context, msg events.SQSMessage) error {
		fmt.Printf("%s runs for key %s\n", msg.MessageId, sqsonce.Key(ctx))
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	resp, err := p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1", Body: `{"order":{"id":"A-1"},"total":40}`},
		{MessageId: "m-2", Body: `{"order":{"id":"A-1"},"total":40}`}, // sent again: a duplicate
		{MessageId: "m-3", Body: `{"order":{"id":1002}}`},             // a number is a key too
		{MessageId: "m-4", Body: `{"orderId":"A-1"}`},                 // no /order/id
	}})
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range resp.BatchItemFailures {
		fmt.Println("retried:", f.ItemIdentifier)
	}
	// Output:
	// m-1 runs for key A-1
	// m-3 runs for key 1002
	// retried: m-4
}

// ledger is a downstream store that keeps the highest fencing token it has
// seen per key and refuses writes with a lower one.
type ledger struct {
	mu      sync.Mutex
	highest map[string]int64
}

func (l *ledger) write(key string, fence int64, entry string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if fence < l.highest[key] {
		return fmt.Errorf("refused %q: fence %d is older than %d", entry, fence, l.highest[key])
	}
	l.highest[key] = fence
	return nil
}

// Fence protects a downstream store from a holder whose lock was taken over
// while it was paused: its token is older than its successor's, and the
// store refuses it.
func ExampleFence() {
	books := &ledger{highest: map[string]int64{}}
	handler := func(ctx context.Context, msg events.SQSMessage) error {
		return books.write(sqsonce.Key(ctx), sqsonce.Fence(ctx), msg.Body)
	}
	_ = handler // as given to sqsonce.New or FromEnv

	// What the store sees when holder 1 resumes after holder 2 took over.
	fmt.Println(books.write("order-9", 2, "debit by holder 2"))
	fmt.Println(books.write("order-9", 1, "debit by holder 1"))
	// Output:
	// <nil>
	// refused "debit by holder 1": fence 1 is older than 2
}

// A failure no retry can fix goes to the operator queue at once, with
// reason permanent-error, instead of using up the message's receives.
func ExamplePermanent() {
	handler := func(ctx context.Context, msg events.SQSMessage) error {
		var order struct{ ID string }
		if err := json.Unmarshal([]byte(msg.Body), &order); err != nil {
			return sqsonce.Permanent(fmt.Errorf("order %s: %w", msg.MessageId, err))
		}
		return nil
	}
	fmt.Println(handler(context.Background(), events.SQSMessage{MessageId: "m-1", Body: "not json"}))
	// Output:
	// permanent: order m-1: invalid character 'o' in literal null (expecting 'u')
}

// An invalid Config is an error naming every bad field, never a panic.
func ExampleNewConsumer_invalid() {
	_, err := sqsonce.NewConsumer(sqsonce.ConsumerConfig{Config: sqsonce.Config{KeyPrefix: "orders#v2"}, InProgress: "wait", OperatorQueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/operator"}, nil)
	fmt.Println(err)
	// Output:
	// sqsonce: invalid Config.Store: nil: give the store that keeps the lock records (dynamostore.New for a DynamoDB table, sqsoncetest.NewStore in a test)
	// sqsonce: invalid Config.KeyPrefix: "orders#v2" contains '#', the separator of prefix and key
	// sqsonce: invalid ConsumerConfig.InProgress: "wait" is not "retry" or "drop"
	// sqsonce: invalid ConsumerConfig.AWS: no region: load it with config.LoadDefaultConfig
}

// ConfigFromEnv reads the deployed function's variables into a Config, for a
// program that sets more (here a key function) before New.
func ExampleConfigFromEnv() {
	env := map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "orders-fn", "LOCAL_CACHE": "1000"}
	cfg, err := sqsonce.ConfigFromEnv(func(name string) (string, bool) { v, ok := env[name]; return v, ok })
	if err != nil {
		log.Fatal(err)
	}
	// Replaces what IDEMPOTENCY_KEY set.
	cfg.Key = sqsonce.KeyFunc(func(msg events.SQSMessage) (string, error) {
		return msg.Attributes["MessageGroupId"] + "/" + msg.Body, nil
	})
	fmt.Println(cfg.KeyPrefix, cfg.LocalCache, cfg.DedupeWindow, cfg.Key)
	// Output:
	// orders-fn 1000 24h0m0s a key function
}

// IsPermanent lets a test of a Handler check how it classifies an error.
func ExampleIsPermanent() {
	err := fmt.Errorf("order m-1: %w", sqsonce.Permanent(errors.New("no such product")))
	fmt.Println(sqsonce.IsPermanent(err), sqsonce.IsPermanent(errors.New("timeout")))
	// Output:
	// true false
}

// An API handler that answers a repeated request with the first one's
// response: the order is placed once, and a retry of the request (same
// Idempotency-Key) gets the same order back, marked as a replay.
func ExampleDoResult() {
	p, err := sqsonce.New(sqsonce.Config{Store: sqsoncetest.NewStore(), KeyPrefix: "api", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	type Order struct {
		ID    string
		Total int
	}
	placed := 0
	handle := func(ctx context.Context, idempotencyKey string) {
		ran := false
		order, err := sqsonce.DoResult(ctx, p, idempotencyKey, func(ctx context.Context) (Order, error) {
			ran = true
			placed++
			return Order{ID: fmt.Sprintf("o-%d", placed), Total: 42}, nil
		})
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		// The function did not run, and there is an answer: the first
		// call's, stored with its completion.
		fmt.Printf("%+v Idempotent-Replayed: %v\n", order, !ran)
	}
	handle(context.Background(), "req-7f3a")
	handle(context.Background(), "req-7f3a")
	fmt.Println("orders placed:", placed)
	// Output:
	// {ID:o-1 Total:42} Idempotent-Replayed: false
	// {ID:o-1 Total:42} Idempotent-Replayed: true
	// orders placed: 1
}

// OnOutcome receives one Outcome per record and per Do: here a counter by
// kind, as an OpenTelemetry or Prometheus counter would be fed.
func ExampleConfig_onOutcome() {
	var mu sync.Mutex
	counts := map[sqsonce.Kind]int{}
	p, err := sqsonce.New(sqsonce.Config{
		Store:     sqsoncetest.NewStore(),
		KeyPrefix: "jobs",
		Logger:    slog.New(slog.DiscardHandler),
		OnOutcome: func(_ context.Context, o sqsonce.Outcome) {
			mu.Lock()
			defer mu.Unlock()
			counts[o.Kind]++
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	for range 3 {
		_ = p.Do(context.Background(), "nightly-report", func(context.Context) error { return nil })
	}
	fmt.Println(counts[sqsonce.KindProcessed], "processed,", counts[sqsonce.KindDuplicate], "duplicates")
	// Output: 1 processed, 2 duplicates
}
