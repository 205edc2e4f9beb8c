package localesm

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// EventSource is the eventSource value Lambda puts on every SQS record.
const EventSource = "aws:sqs"

// NewEvent builds the event Lambda would deliver for msgs received from the
// queue with the given ARN, in the given region.
//
// The result has gone through JSON exactly as it would between Lambda and
// lambda.Start, so a handler sees what it would see in AWS: binary attribute
// values decoded from base64, empty lists rather than nil where Lambda sends
// [], and nothing the wire format cannot carry.
func NewEvent(msgs []sqstypes.Message, queueARN, region string) (events.SQSEvent, error) {
	raw, err := json.Marshal(wireEvent(msgs, queueARN, region))
	if err != nil {
		return events.SQSEvent{}, fmt.Errorf("encode SQS event: %w", err)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		return events.SQSEvent{}, fmt.Errorf("decode SQS event: %w", err)
	}
	return ev, nil
}

// wireEvent is the event before its JSON round trip.
func wireEvent(msgs []sqstypes.Message, queueARN, region string) events.SQSEvent {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, 0, len(msgs))}
	for _, m := range msgs {
		ev.Records = append(ev.Records, record(m, queueARN, region))
	}
	return ev
}

func record(m sqstypes.Message, queueARN, region string) events.SQSMessage {
	attrs := make(map[string]string, len(m.Attributes))
	for k, v := range m.Attributes {
		attrs[k] = v
	}
	msgAttrs := make(map[string]events.SQSMessageAttribute, len(m.MessageAttributes))
	for name, v := range m.MessageAttributes {
		msgAttrs[name] = events.SQSMessageAttribute{
			DataType:    aws.ToString(v.DataType),
			StringValue: v.StringValue,
			BinaryValue: v.BinaryValue,
			// Lambda always sends both lists, empty when unused.
			StringListValues: nonNil(v.StringListValues),
			BinaryListValues: nonNil(v.BinaryListValues),
		}
	}
	return events.SQSMessage{
		MessageId:              aws.ToString(m.MessageId),
		ReceiptHandle:          aws.ToString(m.ReceiptHandle),
		Body:                   aws.ToString(m.Body),
		Md5OfBody:              aws.ToString(m.MD5OfBody),
		Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
		Attributes:             attrs,
		MessageAttributes:      msgAttrs,
		EventSourceARN:         queueARN,
		EventSource:            EventSource,
		AWSRegion:              region,
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// regionFromARN returns the region field of an ARN, or "" when it has none.
func regionFromARN(arn string) string {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) < 6 {
		return ""
	}
	return parts[3]
}
