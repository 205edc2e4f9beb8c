//go:build integration

package demo

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/samstack"
	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/sqsonce"
)

// TestObservedTargetAgainstMoto runs the demo's observed sqs target against
// moto_server through a proxy that loses the answer of the first
// SendMessageBatch after moto applied it: the SDK sends it again, the queue
// holds two copies under one lock, and the observers saw what explains it
// (two attempts carrying that lock; the target's answer: accepted).
func TestObservedTargetAgainstMoto(t *testing.T) {
	t.Parallel()
	awsCfg := mototest.Config(t)
	proxy, err := faultproxy.Start(mototest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	dest := mototest.NewQueue(t, awsCfg, false, nil)
	viaProxy := awsCfg.Copy()
	viaProxy.BaseEndpoint = aws.String(proxy.URL)
	log := NewForwardLog()
	info := &stackInfo{processor: samstack.Function{Name: "processor", Env: map[string]string{"TARGET": "sqs:" + dest}}}
	tg, err := newObservedTarget(viaProxy, info, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	proxy.Script("SendMessageBatch", faultproxy.FailAfter)

	w, err := NewWorkload(WorkloadSpec{Keys: 2, MaxReceiveCount: 1}, 1, "r")
	if err != nil {
		t.Fatal(err)
	}
	p := &producer{w: w, keys: w.KeyIndex(), body: func(s Send, k Key) string { return w.Body(s, k.Kind, false) }, attrs: targetAttributes}
	var msgs []sqsonce.Delivery
	for i, s := range w.Sends {
		body, attrs := p.message(s)
		rec := events.SQSMessage{MessageId: "m" + s.ID, Body: body, MessageAttributes: map[string]events.SQSMessageAttribute{}}
		for name, v := range attrs {
			rec.MessageAttributes[name] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue, BinaryValue: v.BinaryValue}
		}
		msgs = append(msgs, sqsonce.Delivery{Record: rec, Key: s.Key, Fence: int64(10 + i)})
	}
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	for i, err := range tg.Deliver(ctx, msgs) {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}

	consumer := newTargetConsumer(sqs.NewFromConfig(awsCfg), dest)
	if err := consumer.drain(context.Background(), time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	landings := consumer.Landings()
	fobs := log.Snapshot()
	if len(landings) != 4 || len(fobs.Forwards) != 2 || log.AcceptedKeys() != 2 {
		t.Fatalf("%d messages in the queue, forwards %+v; want both messages twice, both handed over once", len(landings), fobs.Forwards)
	}
	for i, f := range fobs.Forwards {
		if f.Outcome != ForwardAccepted || f.RequestID != "req-1" || f.Key != w.Sends[i].Key || f.Send != w.Sends[i].ID || f.Fence != int64(10+i) {
			t.Errorf("forward %d: %+v", i, f)
		}
		if n := fobs.Attempts[lockID{f.Key, f.Fence}]; n != 2 {
			t.Errorf("lock %s/%d: %d attempts seen, want 2", f.Key, f.Fence, n)
		}
	}
	// The proxy injected the lost answer, as -chaos would.
	obs := Observed{Acked: map[string]bool{}, Invocations: map[string]InvocationInfo{"req-1": {Started: t0}}, Chaos: &ChaosStats{Level: "faultproxy in this test"}}
	for _, s := range w.Sends {
		obs.Acked[s.ID] = true
		obs.Completions = append(obs.Completions, Completion{Key: s.Key, RequestID: "req-1", OK: true})
	}
	s := SummarizeTarget(w, landings, obs, fobs, TargetEvaluation{Target: "sqs:" + dest, Queue: dest, Message: p.message})
	if ts := s.Target; !s.OK || ts.MoreThanOnce != 2 || ts.Explained != 2 || ts.AttributesIntact != 4 || ts.BodiesIntact != 4 {
		t.Errorf("ok %v, violations %v, target %+v: want both keys twice, explained, intact", s.OK, s.Violations, ts)
	}
}
