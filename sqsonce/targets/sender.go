package targets

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/sqsonce"
)

// Sender is the sqsonce.Sender on AWS (Config.Sender): it sends a key's
// emitted messages with SQS's SendMessageBatch, SNS's PublishBatch and
// EventBridge's PutEvents, ten a call and within each service's batch size,
// every destination's calls side by side and a FIFO group's in order. Each
// message carries its emit id as the sqsonce.AttrEmitID attribute and, on a
// FIFO destination, as its MessageDeduplicationId; an event, which has no
// attributes, in its detail (sqsonce.EventEmitIDPointer), put as the events
// target puts it (EventsTarget): the body with DetailMember added, the
// source and detail-type from the message's sqsonce.AttrEventSource and
// sqsonce.AttrEventDetailType attributes, DefaultEventSource and
// DefaultDetailType when unset. Each message gets its own error: the call's
// when the call failed as a whole, the entry's when the service failed it
// alone (SQS's and SNS's Failed, EventBridge's ErrorCode).
type Sender struct {
	// SQS, SNS and Events send to "sqs:", "sns:" and "events:"
	// destinations; a message to one whose client is nil is refused.
	SQS    sqsmsg.BatchSender
	SNS    SNSAPI
	Events EventsAPI
}

var _ sqsonce.Sender = (*Sender)(nil)

// NewSender is the Sender on cfg's SQS, SNS and EventBridge clients. The
// function's role needs sqs:SendMessage on each queue, sns:Publish on each
// topic and events:PutEvents on each bus it emits to.
func NewSender(cfg aws.Config) *Sender {
	return &Sender{SQS: sqs.NewFromConfig(cfg), SNS: sns.NewFromConfig(cfg), Events: eventbridge.NewFromConfig(cfg)}
}

// Send implements sqsonce.Sender.
func (s *Sender) Send(ctx context.Context, msgs []sqsonce.Outgoing) []error {
	errs := make([]error, len(msgs))
	var queues []sqsmsg.Batch
	queueOf := map[string]int{}
	topics := map[string][]int{}
	var topicOrder []string
	buses := map[string][]int{}
	var busOrder []string
	for i, m := range msgs {
		kind, dest, _ := strings.Cut(m.To, ":")
		switch kind {
		case "sqs":
			q, ok := queueOf[dest]
			if !ok {
				q = len(queues)
				queueOf[dest] = q
				queues = append(queues, sqsmsg.Batch{QueueURL: dest})
			}
			queues[q].Entries = append(queues[q].Entries, sqsEmitEntry(i, m, sqsmsg.IsFIFO(dest)))
		case "sns":
			if _, ok := topics[dest]; !ok {
				topicOrder = append(topicOrder, dest)
			}
			topics[dest] = append(topics[dest], i)
		case "events":
			if _, ok := buses[dest]; !ok {
				busOrder = append(busOrder, dest)
			}
			buses[dest] = append(buses[dest], i)
		default:
			errs[i] = refused(fmt.Errorf("targets: destination %q is none of sqs:, sns: and events:", m.To))
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if len(queues) == 0 {
			return
		}
		if s.SQS == nil {
			for _, b := range queues {
				for _, e := range b.Entries {
					i, _ := strconv.Atoi(e.RecordID)
					errs[i] = refused(fmt.Errorf("targets: no SQS client to send to %s", b.QueueURL))
				}
			}
			return
		}
		for id, err := range sqsmsg.SendBatches(ctx, s.SQS, callsInFlight, queues...) {
			i, _ := strconv.Atoi(id)
			errs[i] = sqsEntryError(err)
		}
	}()
	for _, topic := range topicOrder {
		s.publish(ctx, topic, msgs, topics[topic], errs)
	}
	for _, bus := range busOrder {
		s.putEvents(ctx, bus, msgs, buses[bus], errs)
	}
	<-done
	return errs
}

// sqsEmitEntry is message i as a SendMessageBatch entry.
func sqsEmitEntry(i int, m sqsonce.Outgoing, fifo bool) sqsmsg.Entry {
	e := sqsmsg.Entry{RecordID: strconv.Itoa(i), Body: m.Body}
	for name, v := range m.Attributes {
		e.SetAttribute(name, sqsmsg.String(v))
	}
	e.SetAttribute(sqsonce.AttrEmitID, sqsmsg.String(m.ID))
	if fifo {
		e.GroupID, e.DeduplicationID = m.GroupID, m.ID
	}
	return e
}

// publish sends the messages idx of msgs to topic, in PublishBatch calls
// that SNS's limits allow.
func (s *Sender) publish(ctx context.Context, topic string, msgs []sqsonce.Outgoing, idx []int, errs []error) {
	if s.SNS == nil {
		for _, i := range idx {
			errs[i] = refused(fmt.Errorf("targets: no SNS client to publish to %s", topic))
		}
		return
	}
	fifo := strings.HasSuffix(topic, ".fifo")
	entries := make([]snstypes.PublishBatchRequestEntry, len(idx))
	sizes := make([]int, len(idx))
	sub := make([]error, len(idx))
	for k, i := range idx {
		m := msgs[i]
		e := snstypes.PublishBatchRequestEntry{Id: aws.String(strconv.Itoa(k)), Message: aws.String(m.Body), MessageAttributes: map[string]snstypes.MessageAttributeValue{}}
		size := len(m.Body)
		attrs := map[string]string{sqsonce.AttrEmitID: m.ID}
		for name, v := range m.Attributes {
			attrs[name] = v
		}
		for name, v := range attrs {
			e.MessageAttributes[name] = snstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
			size += len(name) + len("String") + len(v)
		}
		if fifo {
			e.MessageGroupId, e.MessageDeduplicationId = aws.String(m.GroupID), aws.String(m.ID)
		}
		entries[k], sizes[k] = e, size
		if size > MaxSNSBytes {
			sub[k] = refused(fmt.Errorf("targets: %d bytes with its attributes, over SNS's %d", size, MaxSNSBytes))
		}
	}
	var group func(k int) string
	if fifo {
		group = func(k int) string { return aws.ToString(entries[k].MessageGroupId) }
	}
	t := &SNSTarget{API: s.SNS, TopicARN: topic}
	batches := pack(sub, func(k int) int { return sizes[k] }, maxSNSBatchEntries, MaxSNSBytes)
	sendAll(batches, group, func(batch []int) { t.publish(ctx, entries, batch, sub) })
	for k, i := range idx {
		errs[i] = sub[k]
	}
}

// putEvents puts the messages idx of msgs on bus as events, in PutEvents
// calls of at most ten entries and EventBridge's size.
func (s *Sender) putEvents(ctx context.Context, bus string, msgs []sqsonce.Outgoing, idx []int, errs []error) {
	if s.Events == nil {
		for _, i := range idx {
			errs[i] = refused(fmt.Errorf("targets: no EventBridge client to put events on %s", bus))
		}
		return
	}
	entries := make([]ebtypes.PutEventsRequestEntry, len(idx))
	sizes := make([]int, len(idx))
	for k, i := range idx {
		m := msgs[i]
		entries[k], sizes[k] = eventEntry(bus, m.Attributes[sqsonce.AttrEventSource], m.Attributes[sqsonce.AttrEventDetailType], emitDetail(m))
	}
	t := &EventsTarget{API: s.Events, Bus: bus}
	for k, err := range t.putAll(ctx, entries, sizes) {
		errs[idx[k]] = err
	}
}
