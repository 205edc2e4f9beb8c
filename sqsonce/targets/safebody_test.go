package targets_test

import (
	"context"
	"testing"

	"github.com/sqs-once/sqs-once/internal/retrybudget/retrybudgettest"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// Every target's client carries retrybudget.SafeRequestBody: a delivery the
// service answered is never sent a second time by the SDK's retryer.
func TestTargetClientsNeverRepeatAnAnsweredDelivery(t *testing.T) {
	check := &retrybudgettest.BodyCheck{}
	awsCfg := check.Config()
	fn, err1 := targets.ToFunction(awsCfg, "consumer")
	q, err2 := targets.ToQueue(awsCfg, "https://sqs.us-east-1.amazonaws.com/123456789012/dest")
	topic, err3 := targets.ToTopic(awsCfg, "arn:aws:sns:us-east-1:123456789012:orders")
	bus, err4 := targets.ToBus(awsCfg, "orders", "", "")
	durable, err5 := targets.ToDurableFunction(awsCfg, "orders", "live")
	for _, err := range []error{err1, err2, err3, err4, err5} {
		if err != nil {
			t.Fatal(err)
		}
	}
	msgs := []sqsonce.Delivery{{}}
	msgs[0].Record.MessageId, msgs[0].Record.Body, msgs[0].Key, msgs[0].RecordKey = "m-1", `{"a":1}`, "k", "k"
	for i, tg := range []sqsonce.Target{fn, q, topic, bus, durable} {
		before, _ := check.Counts()
		tg.Deliver(context.Background(), msgs)
		if after, _ := check.Counts(); after == before {
			t.Errorf("target %d sent no request: the test proved nothing", i)
		}
	}
	if sends, writerTos := check.Counts(); writerTos != 0 {
		t.Errorf("%d of %d deliveries handed net/http a body with WriteTo: a target's client lacks retrybudget.SafeRequestBody", writerTos, sends)
	}
}
