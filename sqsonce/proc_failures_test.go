package sqsonce

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

func TestPermanentFailureGoesToOperatorQueue(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be)
		operator := b.queues.newQueue(t, false, nil)
		b.cfg.OperatorQueueURL = operator
		b.processor = b.newProcessor(t)
		_, ev := receiveEvent(t, b, nil, "never parses", "fine")
		poison := ev.Records[0]
		if poison.Body != "never parses" {
			poison = ev.Records[1]
		}
		b.handler.errs[poison.MessageId] = Permanent(errors.New("unparsable body"))

		resp, _ := b.processor.Handle(context.Background(), ev)
		if len(resp.BatchItemFailures) != 0 {
			t.Fatalf("failed %v: a forwarded message must be deleted from the main queue", resp.BatchItemFailures)
		}
		got := b.queues.received(t, operator, 1)
		if len(got) != 1 {
			t.Fatalf("operator queue holds %d messages, want 1", len(got))
		}
		m := got[0]
		if aws.ToString(m.Body) != "never parses" || reasonOf(m) != ReasonPermanent || attr(m, "trace") != "t-1" {
			t.Errorf("operator message body %q attrs %v: want the body, its attributes and sqs-once-reason=%s",
				aws.ToString(m.Body), m.MessageAttributes, ReasonPermanent)
		}
		if id := attr(m, AttrOriginalMessageID); id != poison.MessageId {
			t.Errorf("%s = %q, want the message's id %s: sent back, it must stay the same key", AttrOriginalMessageID, id, poison.MessageId)
		}
	})
}

func TestPermanentFailureIsRetriedWhenOperatorQueueUnavailable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		operator bool
	}{
		{"no operator queue configured", false},
		{"operator queue rejects the message", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			eachBackend(t, func(t *testing.T, be procBackend) {
				b := procSetup(t, be)
				if tt.operator {
					b.cfg.OperatorQueueURL = b.queues.missingQueue(t)
					b.processor = b.newProcessor(t)
				}
				b.handler.errs["p"] = Permanent(errors.New("bad"))
				if failed := b.handle(t, procRecord("p", "x")); !slices.Equal(failed, []string{"p"}) {
					t.Errorf("failed %v, want [p]: the message is deleted only once the operator queue holds it", failed)
				}
			})
		})
	}
}

func TestFailureBackoffGrowsWithReceiveCount(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be, func(c *ConsumerConfig) { c.FailureBackoffBase = 10 * time.Second })
		rec := newFakeQueues()
		p := mustProcessor(t, b.cfg, b.handler.handle, rec)
		var records []events.SQSMessage
		receives := []string{"1", "2", "3", "12", "40"}
		for i, n := range receives {
			id := msgIDs("m", len(receives))[i]
			b.handler.errs[id] = errors.New("fail")
			records = append(records, procRecord(id, "x", receivedTimes(n)))
		}
		// 11 more failures: a batch of 16 needs two ChangeMessageVisibilityBatch calls.
		for _, id := range msgIDs("extra", 11) {
			b.handler.errs[id] = errors.New("fail")
			records = append(records, procRecord(id, "x"))
		}
		if _, err := p.Handle(context.Background(), events.SQSEvent{Records: records}); err != nil {
			t.Fatal(err)
		}

		ins := rec.visibility
		if len(ins) != 2 || len(ins[0].Entries) != 10 || len(ins[1].Entries) != 6 {
			t.Fatalf("%d visibility calls, want 2 batches (10 + 6)", len(ins))
		}
		if url := aws.ToString(ins[0].QueueUrl); !strings.HasSuffix(url, "/123456789012/orders") {
			t.Errorf("queue URL %s not derived from the event source ARN", url)
		}
		// Equal jitter with r = 0.5: 0.75 × min(11 h 40 min, 10 s × 2^n). The
		// cap stays under SQS's 12 hours from the receive.
		want := []int32{15, 30, 60, 30720, 31500}
		byHandle := map[string]int32{}
		for _, e := range ins[0].Entries {
			byHandle[aws.ToString(e.ReceiptHandle)] = e.VisibilityTimeout
		}
		for i, id := range msgIDs("m", len(receives)) {
			if got := byHandle["rh-"+id]; got != want[i] {
				t.Errorf("receive count %s: visibility %d s, want %d s", receives[i], got, want[i])
			}
		}
	})
}

func TestPermanentFailureOnFIFOKeepsItsGroup(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, be procBackend) {
		b := procSetup(t, be)
		b.cfg.OperatorQueueURL = b.queues.newQueue(t, true, nil)
		b.processor = b.newProcessor(t)
		b.handler.errs["a1"] = Permanent(errors.New("bad"))
		// a2 waits for the next delivery: the forward is confirmed only after
		// the group has run, and a2 must not overtake a1 if the forward fails.
		if failed := b.handle(t, procRecord("a1", "x", inGroup("a")), procRecord("a2", "y", inGroup("a"))); !slices.Equal(failed, []string{"a2"}) {
			t.Fatalf("failed %v, want [a2]", failed)
		}
		got := b.queues.received(t, b.cfg.OperatorQueueURL, 1)
		if len(got) != 1 || got[0].Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)] != "a" {
			t.Fatalf("operator queue got %+v, want the message in its group a", got)
		}
		if got := b.handler.Calls(); !slices.Equal(got, []string{"a1"}) {
			t.Errorf("handler calls %v, want [a1]", got)
		}
	})
}

// TestFailureOnTheLastReceiveIsLeftVisible: a record that fails on the last
// receive the queue's redrive policy allows (maxReceiveCount 2 here) gets a
// visibility timeout of 0, so the next receive moves it to the dead-letter
// queue at once; earlier failures, and a processor that does not know the
// queue (no QueueURL), back off. (TestFailureOnTheLastReceiveIsNotDelayed
// checks where the message then goes, on moto_server.)
func TestFailureOnTheLastReceiveIsLeftVisible(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		receives  string
		knowQueue bool
		visible   bool
	}{
		{"last receive", "2", true, true},
		{"an earlier receive", "1", true, false},
		{"queue unknown", "2", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			queues := newFakeQueues()
			main := queues.newQueue(t, false, map[string]string{
				"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:dlq","maxReceiveCount":"2"}`,
			})
			b := procSetup(t, memoryBackend, func(c *ConsumerConfig) {
				c.FailureBackoffBase = 10 * time.Second
				if tt.knowQueue {
					c.QueueURL = main
				}
			})
			p := mustProcessor(t, b.cfg, b.handler.handle, queues)
			msg := procRecord("poison", "x", receivedTimes(tt.receives), func(m *events.SQSMessage) { m.EventSourceARN = queues.queueARN(t, main) })
			b.handler.errs["poison"] = errors.New("downstream 503")
			if failed := handleWith(t, p, msg); !slices.Equal(failed, []string{"poison"}) {
				t.Fatalf("failed %v, want the record", failed)
			}
			got, ok := queues.visibilityChanges()["rh-poison"]
			if !ok {
				t.Fatal("no visibility change asked for")
			}
			if visible := got == 0; visible != tt.visible {
				t.Errorf("visibility timeout %d s; want left visible: %v", got, tt.visible)
			}
		})
	}
}
