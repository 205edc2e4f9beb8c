//go:build integration

package targets_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqs-once/sqs-once/internal/local/localesm"
	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// answerLostOnce sends with the real Sender, and reports its first send
// failed as if every answer were lost after EventBridge took the events:
// the lock must send them again, with the same ids.
type answerLostOnce struct {
	sqsonce.Sender
	mu   sync.Mutex
	lost bool
}

func (s *answerLostOnce) Send(ctx context.Context, msgs []sqsonce.Outgoing) []error {
	errs := s.Sender.Send(ctx, msgs)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.lost {
		s.lost = true
		for i := range errs {
			errs[i] = errors.New("the answer to PutEvents was lost")
		}
	}
	return errs
}

// TestEmitPutsEventsOnABus, on moto_server: a work emits two events, to a
// bus by its name and by its ARN, through a Processor whose Sender is
// targets.NewSender; the answer to the first put is lost, so the next call
// of the key puts them again. A rule sends the bus's events to a queue:
// each event arrives with its body as the detail, its source and
// detail-type, and the emit id at sqsonce.EventEmitIDPointer, the same on
// both puts; a downstream consumer keyed on that pointer handles each
// emitted event once.
func TestEmitPutsEventsOnABus(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	bus, queue := mototest.NewBusToQueue(t, cfg, "shop.orders")
	busARN := "arn:aws:events:" + motoserver.Region + ":123456789012:event-bus/" + bus
	table := mototest.NewIdempotencyTable(t, cfg)
	p, err := sqsonce.New(sqsonce.Config{
		Store:     dynamostore.New(motoserver.Atomic(dynamodb.NewFromConfig(cfg)), table),
		KeyPrefix: "stage1", Logger: quiet,
		Sender: &answerLostOnce{Sender: targets.NewSender(cfg)},
	})
	if err != nil {
		t.Fatal(err)
	}
	source := map[string]string{sqsonce.AttrEventSource: "shop.orders", sqsonce.AttrEventDetailType: "OrderAccepted"}
	runs := 0
	work := func(ctx context.Context) error {
		runs++
		return sqsonce.Emit(ctx,
			sqsonce.Message{To: "events:" + bus, Body: `{"orderId":"A-1","lines":[{"sku":"s-1","qty":2}]}`, Attributes: source},
			sqsonce.Message{To: "events:" + busARN, Body: `{"orderId":"A-1","invoice":true}`, Attributes: source},
		)
	}
	if err := p.Do(ctx, "A-1", work); !errors.Is(err, sqsonce.ErrEmitPending) {
		t.Fatalf("Do with the put's answer lost: %v; want ErrEmitPending", err)
	}
	if err := p.Do(ctx, "A-1", work); !errors.Is(err, sqsonce.ErrDuplicate) {
		t.Fatalf("Do again: %v; want ErrDuplicate, the pending events put", err)
	}
	if runs != 1 {
		t.Errorf("the work ran %d times; want once", runs)
	}

	got := mototest.Receive(t, cfg, queue, 4, 10*time.Second)
	if len(got) != 4 {
		t.Fatalf("%d events arrived; want 4 (two events, each put twice)", len(got))
	}
	ids := map[string]int{}
	kinds := map[string]string{}
	for _, m := range got {
		var ev struct {
			Source     string `json:"source"`
			DetailType string `json:"detail-type"`
			Detail     struct {
				OrderID string `json:"orderId"`
				Invoice bool   `json:"invoice"`
				Lines   []struct {
					SKU string `json:"sku"`
					Qty int    `json:"qty"`
				} `json:"lines"`
				SQSOnce struct {
					EmitID string `json:"emitId"`
				} `json:"sqsOnce"`
			} `json:"detail"`
		}
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err != nil {
			t.Fatalf("event %s: %v", aws.ToString(m.Body), err)
		}
		if ev.Source != "shop.orders" || ev.DetailType != "OrderAccepted" || ev.Detail.OrderID != "A-1" {
			t.Errorf("event %s: want source shop.orders, detail-type OrderAccepted, the body as its detail", aws.ToString(m.Body))
		}
		kind := "invoice"
		if !ev.Detail.Invoice {
			kind = "lines"
			if len(ev.Detail.Lines) != 1 || ev.Detail.Lines[0].SKU != "s-1" || ev.Detail.Lines[0].Qty != 2 {
				t.Errorf("event %s: the body's lines lost", aws.ToString(m.Body))
			}
		}
		id := ev.Detail.SQSOnce.EmitID
		if len(id) != 32 {
			t.Errorf("event %s: emit id %q; want 32 hex digits at %s", aws.ToString(m.Body), id, sqsonce.EventEmitIDPointer)
		}
		if prev, ok := kinds[id]; ok && prev != kind {
			t.Errorf("emit id %s on two events", id)
		}
		kinds[id] = kind
		ids[id]++
	}
	if len(ids) != 2 {
		t.Errorf("emit ids %v; want two, each on both puts of its event", ids)
	}
	for id, n := range ids {
		if n != 2 {
			t.Errorf("emit id %s on %d events; want 2: the same on every put", id, n)
		}
	}

	// The next stage, keyed on the id in the event, handles each event once.
	handled := map[string]int{}
	p2, err := sqsonce.NewConsumer(sqsonce.ConsumerConfig{
		Config: sqsonce.Config{Store: dynamostore.New(motoserver.Atomic(dynamodb.NewFromConfig(cfg)), table), KeyPrefix: "stage2", Logger: quiet},
		Key:    sqsonce.KeyFromBody(sqsonce.EventEmitIDPointer), AWS: cfg,
	}, func(ctx context.Context, msg events.SQSMessage) error {
		var ev struct {
			Detail struct {
				SQSOnce struct {
					EmitID string `json:"emitId"`
				} `json:"sqsOnce"`
			} `json:"detail"`
		}
		if err := json.Unmarshal([]byte(msg.Body), &ev); err != nil {
			return sqsonce.Permanent(err)
		}
		handled[ev.Detail.SQSOnce.EmitID]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	queueARN := mototest.QueueARN(t, cfg, queue)
	for _, m := range got {
		ev, err := localesm.NewEvent(append(got[:0:0], m), queueARN, motoserver.Region)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := p2.Handle(ctx, ev)
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("stage 2: %v, failures %v", err, resp.BatchItemFailures)
		}
	}
	for id := range ids {
		if handled[id] != 1 {
			t.Errorf("stage 2 handled the event of emit id %s %d times; want once", id, handled[id])
		}
	}
	if len(handled) != len(ids) {
		t.Errorf("stage 2 handled %v; want the emitted events %v, each once", handled, ids)
	}
}
