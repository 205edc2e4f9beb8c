//go:build integration

package targets_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/local/localesm"
	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// completeFails is a store whose Complete fails unapplied while failing
// is set, every retry included: a processor that dies between its
// delivery and its completion, as far as the record shows.
type completeFails struct {
	store.Store
	mu      sync.Mutex
	failing bool
}

func (s *completeFails) set(failing bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing = failing
}

func (s *completeFails) Complete(ctx context.Context, lease store.Lease, c store.Completion) error {
	s.mu.Lock()
	failing := s.failing
	s.mu.Unlock()
	if failing {
		return &store.StoreError{Op: "complete", ID: lease.ID, Err: context.DeadlineExceeded}
	}
	return s.Store.Complete(ctx, lease, c)
}

// TestTargetSQSCopiesOnceDownstream: the copies an sqs target can put on
// a standard queue (the send's answer lost and the SDK sending again; a
// completion not recorded, then the same order delivered again after the
// lock expired, forwarded again under another fence) all carry the same
// sqs-once-key, so a downstream sqsonce consumer keyed on it
// (IDEMPOTENCY_KEY=attribute:sqs-once-key) runs its handler once per
// order. The copies themselves are counted too: without that key the
// downstream handler would run twice for two of the three orders.
func TestTargetSQSCopiesOnceDownstream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dest := mototest.NewQueue(t, b.aws, false, nil)
	proxy, err := faultproxy.Start(mototest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	via := b.aws.Copy()
	via.BaseEndpoint = aws.String(proxy.URL)
	tg, err := targets.ToQueue(via, dest)
	if err != nil {
		t.Fatal(err)
	}
	cfg := b.cfg
	fails := &completeFails{Store: cfg.Store}
	cfg.Store = fails
	cfg.Target = tg
	cfg.Key = sqsonce.KeyFromBody("/orderId")
	up, err := sqsonce.NewConsumer(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}

	// o-1: delivered, its completion not recorded (reported done: the
	// copy is out); the producer sends it again after the lock expired,
	// and it is forwarded again under a new fence.
	fails.set(true)
	if failed := handleWith(t, up, orderRecord("m1", "o-1")); len(failed) != 0 {
		t.Fatalf("o-1: failed %v; an unrecorded completion is reported done", failed)
	}
	fails.set(false)
	b.clock.Advance(2 * time.Minute) // past LOCK_TIMEOUT (60 s)
	if failed := handleWith(t, up, orderRecord("m1-again", "o-1")); len(failed) != 0 {
		t.Fatalf("o-1 again: failed %v", failed)
	}
	// o-2: SQS applies the send and its answer is lost; the SDK sends the
	// batch again.
	proxy.Script("SendMessageBatch", faultproxy.FailAfter)
	if failed := handleWith(t, up, orderRecord("m2", "o-2")); len(failed) != 0 {
		t.Fatalf("o-2: failed %v; the SDK's resend was accepted", failed)
	}
	// o-3: no fault.
	if failed := handleWith(t, up, orderRecord("m3", "o-3")); len(failed) != 0 {
		t.Fatalf("o-3: failed %v", failed)
	}

	got := mototest.Receive(t, b.aws, dest, 5, 10*time.Second)
	copies := map[string]int{}
	for _, m := range got {
		copies[attr(m, targets.AttrKey)]++
	}
	if copies["o-1"] != 2 || copies["o-2"] != 2 || copies["o-3"] != 1 {
		t.Fatalf("copies per key %v; want o-1 2 (forwarded again after an unrecorded completion), o-2 2 (the SDK's resend), o-3 1", copies)
	}

	// Downstream: a consumer keyed on the forwarded key, on a table of
	// its own.
	down := b.cfg
	table := mototest.NewIdempotencyTable(t, b.aws)
	down.Store = dynamostore.New(motoserver.Atomic(dynamodb.NewFromConfig(b.aws)), table)
	down.Key = sqsonce.KeyFromAttribute(targets.AttrKey)
	var mu sync.Mutex
	runs := map[string]int{}
	consumer, err := sqsonce.NewConsumer(down, func(_ context.Context, msg events.SQSMessage) error {
		var o struct{ OrderID string }
		if err := json.Unmarshal([]byte(msg.Body), &o); err != nil {
			return sqsonce.Permanent(err)
		}
		mu.Lock()
		runs[o.OrderID]++
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// One message per event, as the copies may arrive at any time.
	for _, m := range got {
		ev, err := localesm.NewEvent([]sqstypes.Message{m}, "arn:aws:sqs:us-east-1:123456789012:dest", "us-east-1")
		if err != nil {
			t.Fatal(err)
		}
		if failed := handleWith(t, consumer, ev.Records...); len(failed) != 0 {
			t.Fatalf("downstream failed %v", failed)
		}
	}
	for _, o := range []string{"o-1", "o-2", "o-3"} {
		if runs[o] != 1 {
			t.Errorf("downstream handler ran %d times for %s; want once (runs %v)", runs[o], o, runs)
		}
	}
}
