//go:build integration

package targets_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

func str(s string) *string { return &s }

// records are three messages with attributes of every data type SQS has,
// custom suffixes included.
func records(fifo bool) []events.SQSMessage {
	arn := "arn:aws:sqs:us-east-1:123456789012:source"
	if fifo {
		arn += ".fifo"
	}
	recs := []events.SQSMessage{
		{MessageId: "m1", Body: `{"orderId":"o-1","amount":12.5}`, MessageAttributes: map[string]events.SQSMessageAttribute{
			"tenant": {DataType: "String", StringValue: str("acme")},
			"amount": {DataType: "Number.float", StringValue: str("12.50")},
			"digest": {DataType: "Binary.sha", BinaryValue: []byte{0, 1, 2, 255}},
		}},
		{MessageId: "m2", Body: "plain text, not JSON \u00e9"},
		{MessageId: "m3", Body: ` {"orderId":"o-3"} `},
	}
	for i := range recs {
		recs[i].EventSourceARN = arn
		recs[i].EventSource = "aws:sqs"
		recs[i].Attributes = map[string]string{}
		if fifo {
			recs[i].Attributes["MessageGroupId"] = "customer-7"
		}
	}
	return recs
}

// withoutBinary drops Binary attributes: moto's SNS does not deliver a
// message with one to a queue (real SNS does), so SNS tests carry the
// String and Number ones.
func withoutBinary(recs []events.SQSMessage) []events.SQSMessage {
	for _, r := range recs {
		for name, a := range r.MessageAttributes {
			if strings.HasPrefix(a.DataType, "Binary") {
				delete(r.MessageAttributes, name)
			}
		}
	}
	return recs
}

func keyed(recs []events.SQSMessage) []sqsonce.Delivery {
	msgs := make([]sqsonce.Delivery, len(recs))
	for i, r := range recs {
		msgs[i] = sqsonce.Delivery{Record: r, Key: "key-" + r.MessageId, Fence: 1700000000000 + int64(i)}
	}
	return msgs
}

func noErrors(t *testing.T, errs []error) {
	t.Helper()
	for i, err := range errs {
		if err != nil {
			t.Errorf("message %d: %v", i, err)
		}
	}
}

func byBody(msgs []sqstypes.Message) map[string]sqstypes.Message {
	out := map[string]sqstypes.Message{}
	for _, m := range msgs {
		out[aws.ToString(m.Body)] = m
	}
	return out
}

// checkForwarded asserts each record arrived once, body and attributes
// byte for byte, with its key and fence.
func checkForwarded(t *testing.T, got []sqstypes.Message, msgs []sqsonce.Delivery) {
	t.Helper()
	if len(got) != len(msgs) {
		t.Fatalf("%d messages arrived, want %d", len(got), len(msgs))
	}
	bodies := byBody(got)
	for _, m := range msgs {
		arrived, ok := bodies[m.Record.Body]
		if !ok {
			t.Errorf("%s: body %q did not arrive byte for byte", m.Record.MessageId, m.Record.Body)
			continue
		}
		for name, a := range m.Record.MessageAttributes {
			v := arrived.MessageAttributes[name]
			if aws.ToString(v.DataType) != a.DataType || aws.ToString(v.StringValue) != aws.ToString(a.StringValue) || string(v.BinaryValue) != string(a.BinaryValue) {
				t.Errorf("%s: attribute %s arrived as %+v, want %+v", m.Record.MessageId, name, v, a)
			}
		}
		if k := aws.ToString(arrived.MessageAttributes[targets.AttrKey].StringValue); k != m.Key {
			t.Errorf("%s: %s = %q, want %q", m.Record.MessageId, targets.AttrKey, k, m.Key)
		}
		if f := aws.ToString(arrived.MessageAttributes[targets.AttrFence].StringValue); f != fmt.Sprint(m.Fence) {
			t.Errorf("%s: %s = %q, want %d", m.Record.MessageId, targets.AttrFence, f, m.Fence)
		}
	}
}

// must(v, err)(t) is v, failing the test on err: must(targets.ToQueue(...))(t).
func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func TestSQSTargetForwardsByteForByte(t *testing.T) {
	t.Parallel()
	for _, fifo := range []bool{false, true} {
		t.Run(fmt.Sprintf("fifo=%t", fifo), func(t *testing.T) {
			t.Parallel()
			cfg := mototest.Config(t)
			dest := mototest.NewQueue(t, cfg, fifo, nil)
			msgs := keyed(records(false))
			noErrors(t, must(targets.ToQueue(cfg, dest))(t).Deliver(context.Background(), msgs))
			got := mototest.Receive(t, cfg, dest, len(msgs), 5*time.Second)
			checkForwarded(t, got, msgs)
			if fifo {
				for _, m := range got {
					if g := m.Attributes["MessageGroupId"]; !strings.HasPrefix(g, "key-") {
						t.Errorf("group %q, want the key on a standard source", g)
					}
				}
			}
		})
	}
}

// A FIFO destination drops a second send of a key: a delivery retried after
// a lost answer does not arrive twice.
func TestSQSTargetFIFODestinationDeduplicatesByKey(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	dest := mototest.NewQueue(t, cfg, true, nil)
	tg := must(targets.ToQueue(cfg, dest))(t)
	msgs := keyed(records(true))
	noErrors(t, tg.Deliver(context.Background(), msgs))
	noErrors(t, tg.Deliver(context.Background(), msgs))
	got := mototest.Receive(t, cfg, dest, len(msgs)+1, 3*time.Second)
	checkForwarded(t, got, msgs)
	for _, m := range got {
		if g := m.Attributes["MessageGroupId"]; g != "customer-7" {
			t.Errorf("group %q, want the source's customer-7", g)
		}
	}
}

func TestSNSTargetPublishesByteForByte(t *testing.T) {
	t.Parallel()
	for _, fifo := range []bool{false, true} {
		t.Run(fmt.Sprintf("fifo=%t", fifo), func(t *testing.T) {
			t.Parallel()
			cfg := mototest.Config(t)
			topic, queue := mototest.NewTopicToQueue(t, cfg, fifo)
			msgs := keyed(withoutBinary(records(fifo)))
			noErrors(t, must(targets.ToTopic(cfg, topic))(t).Deliver(context.Background(), msgs))
			checkForwarded(t, mototest.Receive(t, cfg, queue, len(msgs), 5*time.Second), msgs)
		})
	}
}

func TestEventsTargetPutsDetailWithKey(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	ctx := context.Background()
	bus, queue := mototest.NewBusToQueue(t, cfg, "orders-app")
	tg := must(targets.ToBus(cfg, bus, "orders-app", "order placed"))(t)
	msgs := keyed(records(false))
	noErrors(t, tg.Deliver(ctx, msgs))
	got := mototest.Receive(t, cfg, queue, len(msgs), 5*time.Second)
	if len(got) != len(msgs) {
		t.Fatalf("%d events arrived, want %d", len(got), len(msgs))
	}
	details := map[string]map[string]any{}
	for _, m := range got {
		var ev struct {
			Source     string         `json:"source"`
			DetailType string         `json:"detail-type"`
			Detail     map[string]any `json:"detail"`
		}
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err != nil {
			t.Fatalf("event %s: %v", aws.ToString(m.Body), err)
		}
		if ev.Source != "orders-app" || ev.DetailType != "order placed" {
			t.Errorf("source %q detail-type %q", ev.Source, ev.DetailType)
		}
		meta, _ := ev.Detail[targets.DetailMember].(map[string]any)
		details[fmt.Sprint(meta["key"])] = ev.Detail
	}
	if d := details["key-m1"]; d["orderId"] != "o-1" || d["amount"] != 12.5 {
		t.Errorf("a JSON object body is the Detail: %v", d)
	}
	if d := details["key-m2"]; d["body"] != "plain text, not JSON \u00e9" {
		t.Errorf("a text body is wrapped: %v", d)
	}
	if d := details["key-m3"]; d["orderId"] != "o-3" {
		t.Errorf("an object with white space is the Detail: %v", d)
	}
	for k, d := range details {
		meta, _ := d[targets.DetailMember].(map[string]any)
		if fence, _ := meta["fence"].(float64); fence < 1700000000000 {
			t.Errorf("%s: fence %v missing from the Detail", k, meta["fence"])
		}
	}
}

// refusingSQS is the real client, except that SQS refuses the entries whose
// body contains "refuse-me" as it refuses an invalid message: not sent,
// listed in Failed with SenderFault. moto refuses no single entry of a
// batch (it fails the whole call), so the refusal is played here.
type refusingSQS struct{ *sqs.Client }

func (r refusingSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	var pass []sqstypes.SendMessageBatchRequestEntry
	var failed []sqstypes.BatchResultErrorEntry
	for _, e := range in.Entries {
		if strings.Contains(aws.ToString(e.MessageBody), "refuse-me") {
			failed = append(failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InvalidParameterValue"), Message: aws.String("invalid message"), SenderFault: true})
			continue
		}
		pass = append(pass, e)
	}
	out := &sqs.SendMessageBatchOutput{}
	if len(pass) > 0 {
		in2 := *in
		in2.Entries = pass
		var err error
		if out, err = r.Client.SendMessageBatch(ctx, &in2, optFns...); err != nil {
			return nil, err
		}
	}
	out.Failed = append(out.Failed, failed...)
	return out, nil
}

func TestSQSTargetRefusedEntryFailsAlone(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	dest := mototest.NewQueue(t, cfg, false, nil)
	recs := records(false)
	recs[1].Body = "refuse-me"
	msgs := keyed(recs)
	tg := &targets.SQSTarget{API: refusingSQS{sqs.NewFromConfig(cfg)}, QueueURL: dest}
	errs := tg.Deliver(context.Background(), msgs)
	if errs[0] != nil || !errors.Is(errs[1], sqsonce.ErrTargetRefused) || errs[2] != nil {
		t.Fatalf("errors %v, want only the second refused", errs)
	}
	checkForwarded(t, mototest.Receive(t, cfg, dest, 3, 3*time.Second), []sqsonce.Delivery{msgs[0], msgs[2]})
}

// refusingSNS is refusingSQS for SNS: moto fails the whole PublishBatch
// for one invalid entry, where SNS fails the entry alone.
type refusingSNS struct{ *sns.Client }

func (r refusingSNS) PublishBatch(ctx context.Context, in *sns.PublishBatchInput, optFns ...func(*sns.Options)) (*sns.PublishBatchOutput, error) {
	var pass []snstypes.PublishBatchRequestEntry
	var failed []snstypes.BatchResultErrorEntry
	for _, e := range in.PublishBatchRequestEntries {
		if strings.Contains(aws.ToString(e.Message), "refuse-me") {
			failed = append(failed, snstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InvalidParameter"), Message: aws.String("invalid message"), SenderFault: true})
			continue
		}
		pass = append(pass, e)
	}
	out := &sns.PublishBatchOutput{}
	if len(pass) > 0 {
		in2 := *in
		in2.PublishBatchRequestEntries = pass
		var err error
		if out, err = r.Client.PublishBatch(ctx, &in2, optFns...); err != nil {
			return nil, err
		}
	}
	out.Failed = append(out.Failed, failed...)
	return out, nil
}

func TestSNSTargetRefusedEntryFailsAlone(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	topic, queue := mototest.NewTopicToQueue(t, cfg, false)
	recs := withoutBinary(records(false))
	recs[1].Body = "refuse-me"
	msgs := keyed(recs)
	tg := &targets.SNSTarget{API: refusingSNS{sns.NewFromConfig(cfg)}, TopicARN: topic}
	errs := tg.Deliver(context.Background(), msgs)
	if errs[0] != nil || !errors.Is(errs[1], sqsonce.ErrTargetRefused) || errs[2] != nil {
		t.Fatalf("errors %v, want only the second refused", errs)
	}
	checkForwarded(t, mototest.Receive(t, cfg, queue, 3, 3*time.Second), []sqsonce.Delivery{msgs[0], msgs[2]})
}

// A whole call SNS refuses (moto checks a Number attribute's value) is
// refused for every entry of it: no retry fixes it.
func TestSNSTargetRefusedCall(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	topic, _ := mototest.NewTopicToQueue(t, cfg, false)
	recs := withoutBinary(records(false))
	recs[1].MessageAttributes = map[string]events.SQSMessageAttribute{"n": {DataType: "Number", StringValue: str("not a number")}}
	for i, err := range must(targets.ToTopic(cfg, topic))(t).Deliver(context.Background(), keyed(recs)) {
		if !errors.Is(err, sqsonce.ErrTargetRefused) {
			t.Errorf("message %d: %v, want ErrRefused", i, err)
		}
	}
}

// A send whose answer is lost is retried by the SDK: a FIFO destination
// drops the second copy by its key-derived deduplication id, so the
// message arrives once. (A standard queue cannot: see the README's limits.)
func TestSQSTargetLostAnswerOnFIFODestinationArrivesOnce(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	dest := mototest.NewQueue(t, cfg, true, nil)
	p, err := faultproxy.Start(mototest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	via := cfg.Copy()
	via.BaseEndpoint = aws.String(p.URL)
	tg := must(targets.ToQueue(via, dest))(t)
	p.Script("SendMessageBatch", faultproxy.FailAfter)
	msgs := keyed(records(true))
	noErrors(t, tg.Deliver(context.Background(), msgs))
	if n := p.Stats().Forwarded["SendMessageBatch"]; n != 2 {
		t.Fatalf("%d sends reached SQS, want the lost one and its retry", n)
	}
	checkForwarded(t, mototest.Receive(t, cfg, dest, len(msgs)+1, 3*time.Second), msgs)
}
