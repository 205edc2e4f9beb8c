// The records both test tiers build: the hermetic tests (no build tag) and
// the integration tests against moto_server (setup_test.go) share them.

package replay

import (
	"fmt"

	"github.com/aws/aws-lambda-go/events"
)

// record is a dead letter as the Lambda event delivers it.
func record(id, body string, attrs map[string]events.SQSMessageAttribute) events.SQSMessage {
	return events.SQSMessage{MessageId: id, Body: body, MessageAttributes: attrs, Attributes: map[string]string{}}
}

func str(dataType, v string) events.SQSMessageAttribute {
	return events.SQSMessageAttribute{DataType: dataType, StringValue: &v}
}

func attrs(n int) map[string]events.SQSMessageAttribute {
	m := map[string]events.SQSMessageAttribute{}
	for i := range n {
		m[fmt.Sprint("a", i)] = str("String", fmt.Sprint("v", i))
	}
	return m
}

func records(n int, prefix string, attrs map[string]events.SQSMessageAttribute) []events.SQSMessage {
	var recs []events.SQSMessage
	for i := range n {
		recs = append(recs, record(fmt.Sprintf("%s-%d", prefix, i), fmt.Sprintf("%s body %d", prefix, i), attrs))
	}
	return recs
}

func fifoRecord(id, body, group string, attrs map[string]events.SQSMessageAttribute) events.SQSMessage {
	r := record(id, body, attrs)
	if group != "" {
		r.Attributes["MessageGroupId"] = group
		r.Attributes["MessageDeduplicationId"] = "producer-dedup-" + id
	}
	return r
}
