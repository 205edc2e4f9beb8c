package targets_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/memstore"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// The targets handed to a Processor through sqsonce's public API, as a
// Lambda user configures them. These tests live here, not in package
// sqsonce, because this package imports sqsonce.

// nowhere is an AWS configuration whose clients reach nothing (a closed
// loopback port), should a check ever let a call through.
var nowhere = aws.Config{Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:1"),
	Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}

// quiet discards the log of the processors the tests build.
var quiet = slog.New(slog.DiscardHandler)

// countingStore counts the calls that reach the store.
type countingStore struct {
	store.Store
	n atomic.Int32
}

func (s *countingStore) Acquire(ctx context.Context, req store.AcquireRequest) (store.Lease, error) {
	s.n.Add(1)
	return s.Store.Acquire(ctx, req)
}

func (s *countingStore) Renew(ctx context.Context, lease store.Lease, lockUntil time.Time) (store.Lease, error) {
	s.n.Add(1)
	return s.Store.Renew(ctx, lease, lockUntil)
}

func (s *countingStore) Complete(ctx context.Context, lease store.Lease, c store.Completion) error {
	s.n.Add(1)
	return s.Store.Complete(ctx, lease, c)
}

func (s *countingStore) Release(ctx context.Context, lease store.Lease, now time.Time) error {
	s.n.Add(1)
	return s.Store.Release(ctx, lease, now)
}

func (s *countingStore) Read(ctx context.Context, id string) (store.Record, error) {
	s.n.Add(1)
	return s.Store.Read(ctx, id)
}

// deployedConfig is the configuration the deployed function reads from its
// environment, on st.
func deployedConfig(t *testing.T, st store.Store) sqsonce.ConsumerConfig {
	t.Helper()
	cfg, err := sqsonce.ConfigFromEnv(lookup(map[string]string{
		"IDEMPOTENCY_TABLE": "unused", // ConfigFromEnv requires it; Config.Store replaces it
		"KEY_PREFIX":        "test",
		"LOCK_TIMEOUT":      "60",
		"DEDUPE_WINDOW":     "3600",
	}))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store = st
	cfg.AWS = nowhere
	cfg.Logger = quiet
	return cfg
}

// An sqs target that is the consumed queue would loop: refused with an
// invocation error naming the setting, before anything is delivered.
func TestTargetIsSourceRefused(t *testing.T) {
	t.Parallel()
	tg, err := targets.ToQueue(nowhere, "https://sqs.us-east-1.amazonaws.com/123456789012/orders")
	if err != nil {
		t.Fatal(err)
	}
	st := &countingStore{Store: memstore.New()}
	// The same configuration written in Go.
	goCfg := sqsonce.ConsumerConfig{Config: sqsonce.Config{Store: st, KeyPrefix: "test", LockTimeout: time.Minute, DedupeWindow: time.Hour, Logger: quiet}, AWS: nowhere}
	for setting, cfg := range map[string]sqsonce.ConsumerConfig{"TARGET": deployedConfig(t, st), "ConsumerConfig.Target": goCfg} {
		cfg.Target = tg
		cfg.Key = sqsonce.KeyFromBody("/orderId")
		p, err := sqsonce.NewConsumer(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		rec := events.SQSMessage{MessageId: "m1", Body: `{"orderId":"o-1"}`, EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders"}
		_, err = p.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{rec}})
		if !errors.Is(err, sqsonce.ErrQueueLoop) || !strings.Contains(err.Error(), setting+": the target queue") || !strings.Contains(err.Error(), "the queue being consumed") {
			t.Fatalf("Handle: %v, want ErrQueueLoop naming %s", err, setting)
		}
	}
	if n := st.n.Load(); n != 0 {
		t.Errorf("%d store calls under a configuration that loops, want none", n)
	}
}

// TestAPITargetAndHandlerTogetherRefused: a Target with a Handler is New's
// error, not Handle's; a bad target is refused where it is built.
func TestAPITargetAndHandlerTogetherRefused(t *testing.T) {
	t.Parallel()
	region := aws.Config{Region: "us-east-1"}
	queue, err := targets.ToQueue(region, "https://sqs.us-east-1.amazonaws.com/123456789012/q")
	if err != nil {
		t.Fatal(err)
	}
	cfg := sqsonce.ConsumerConfig{Config: sqsonce.Config{Store: memstore.New(), KeyPrefix: "p"}, Target: queue}
	if _, err := sqsonce.NewConsumer(cfg, func(context.Context, events.SQSMessage) error { return nil }); err == nil || !strings.Contains(err.Error(), "ConsumerConfig.Target") {
		t.Fatalf("New: %v, want an error naming ConsumerConfig.Target", err)
	}
	if _, err := targets.ToQueue(region, "orders"); err == nil {
		t.Error("ToQueue of a queue name, not a URL: no error")
	}
	_, err = targets.FromEnv(lookup(map[string]string{"TARGET": "sqs:orders"}), region, nil)
	if err == nil || !strings.Contains(err.Error(), "TARGET") {
		t.Errorf("targets.FromEnv with a bad TARGET: %v, want an error naming TARGET", err)
	}
}

// TestAPIConfigFromEnvLeavesTheTargetToPackageTarget: ConfigFromEnv does
// not read TARGET (a program without a target links none of their
// clients); targets.FromEnv reads it, with the bus's source and detail type.
func TestAPIConfigFromEnvLeavesTheTargetToPackageTarget(t *testing.T) {
	t.Parallel()
	env := map[string]string{"IDEMPOTENCY_TABLE": "t", "KEY_PREFIX": "p", "TARGET": "events:orders", "TARGET_EVENT_SOURCE": "shop", "TARGET_DETAIL_TYPE": "order"}
	cfg, err := sqsonce.ConfigFromEnv(lookup(env))
	if err != nil || cfg.Target != nil {
		t.Fatalf("ConfigFromEnv: target %v, %v; want no target and no error", cfg.Target, err)
	}
	tg, err := targets.FromEnv(lookup(env), aws.Config{Region: "us-east-1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	bus, ok := tg.(*targets.EventsTarget)
	if !ok || bus.Bus != "orders" || bus.Source != "shop" || bus.DetailType != "order" {
		t.Errorf("targets.FromEnv = %#v, want the bus orders with source shop and detail type order", tg)
	}
}
