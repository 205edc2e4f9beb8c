package targets

import (
	"encoding/json"

	"github.com/aws/aws-lambda-go/events"
)

// lambdaRecord is a record in the shape Lambda's SQS event source mapping
// gives a function, which events.SQSMessage does not reproduce on its own:
// md5OfMessageAttributes is null (not "") without attributes,
// messageAttributes is {} (not null), and each attribute's list values are
// [] (not null). A consumer in any language then reads what Lambda would
// have given it.
type lambdaRecord struct {
	MessageID              string                     `json:"messageId"`
	ReceiptHandle          string                     `json:"receiptHandle"`
	Body                   string                     `json:"body"`
	Attributes             map[string]string          `json:"attributes"`
	MessageAttributes      map[string]lambdaAttribute `json:"messageAttributes"`
	Md5OfMessageAttributes *string                    `json:"md5OfMessageAttributes"`
	Md5OfBody              string                     `json:"md5OfBody"`
	EventSource            string                     `json:"eventSource"`
	EventSourceARN         string                     `json:"eventSourceARN"`
	AWSRegion              string                     `json:"awsRegion"`
}

type lambdaAttribute struct {
	StringValue      *string  `json:"stringValue,omitempty"`
	BinaryValue      []byte   `json:"binaryValue,omitempty"`
	StringListValues []string `json:"stringListValues"`
	BinaryListValues [][]byte `json:"binaryListValues"`
	DataType         string   `json:"dataType"`
}

// encodeRecord is rec as one element of a Lambda SQS event's Records.
func encodeRecord(rec events.SQSMessage) ([]byte, error) {
	r := lambdaRecord{
		MessageID:         rec.MessageId,
		ReceiptHandle:     rec.ReceiptHandle,
		Body:              rec.Body,
		Attributes:        rec.Attributes,
		MessageAttributes: make(map[string]lambdaAttribute, len(rec.MessageAttributes)),
		Md5OfBody:         rec.Md5OfBody,
		EventSource:       rec.EventSource,
		EventSourceARN:    rec.EventSourceARN,
		AWSRegion:         rec.AWSRegion,
	}
	if r.Attributes == nil {
		r.Attributes = map[string]string{}
	}
	if rec.Md5OfMessageAttributes != "" {
		r.Md5OfMessageAttributes = &rec.Md5OfMessageAttributes
	}
	for name, a := range rec.MessageAttributes {
		la := lambdaAttribute{
			StringValue:      a.StringValue,
			BinaryValue:      a.BinaryValue,
			StringListValues: a.StringListValues,
			BinaryListValues: a.BinaryListValues,
			DataType:         a.DataType,
		}
		if la.StringListValues == nil {
			la.StringListValues = []string{}
		}
		if la.BinaryListValues == nil {
			la.BinaryListValues = [][]byte{}
		}
		r.MessageAttributes[name] = la
	}
	return json.Marshal(r)
}

// eventPrefix and eventSuffix wrap the encoded records, joined by commas,
// into an event: its size is known exactly before it is built.
const (
	eventPrefix = `{"Records":[`
	eventSuffix = `]}`
)

// eventSize is the size of an event of records whose encodings total bytes.
func eventSize(n, bytes int) int {
	return len(eventPrefix) + bytes + max(n-1, 0) + len(eventSuffix)
}

func buildEvent(records [][]byte) []byte {
	out := make([]byte, 0, eventSize(len(records), totalLen(records)))
	out = append(out, eventPrefix...)
	for i, r := range records {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, r...)
	}
	return append(out, eventSuffix...)
}

func totalLen(records [][]byte) int {
	n := 0
	for _, r := range records {
		n += len(r)
	}
	return n
}
