package sqsmsg

import (
	"encoding/base64"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Attribute names the suite reads and writes. AttrReplayCount is fixed:
// installed users of the reference replayer rely on it.
const (
	AttrReplayCount       = "sqs-dlq-replay-nb"
	AttrOriginalMessageID = "sqs-dlq-original-message-id"
	AttrReason            = "sqs-once-reason"
	// AttrFirstSent is when the message was first enqueued, in epoch
	// milliseconds (Number): the replayer stamps it on the first replay and
	// keeps it on later ones, so a replay, a new message to SQS, still shows
	// its true age and cannot be kept alive for ever.
	AttrFirstSent = "sqs-once-first-sent"
	// SystemAttrTraceHeader is the X-Ray trace header system attribute. It
	// does not count against MaxAttributes or MaxMessageBytes.
	SystemAttrTraceHeader = "AWSTraceHeader"
)

// EventDetailMember is the member of an EventBridge event's detail that
// sqs-once adds: {"emitId": "<the emit id>"} on an event sqsonce.Emit
// stages, the key and fence on one the events target forwards
// (targets.DetailMember). Here so that both packages name one constant.
const EventDetailMember = "sqsOnce"

// SQS limits (Amazon SQS Developer Guide, quotas; raised from 256 KiB to 1 MiB
// in 2025). moto 5.2 enforces the same byte limits but counts only the body.
const (
	// MaxAttributes is the number of message attributes SQS allows per message.
	MaxAttributes = 10
	// MaxMessageBytes is the largest message SQS accepts: body plus, for every
	// attribute, its name, data type and value.
	MaxMessageBytes = 1 << 20
	// MaxBatchBytes is the largest total of message sizes in one SendMessageBatch.
	MaxBatchBytes = 1 << 20
	// MaxBatchEntries is the most entries one SendMessageBatch accepts.
	MaxBatchEntries = 10
)

// Attributes converts the attributes of a Lambda SQS record into attributes
// for sending, losslessly: the data type is copied exactly (custom suffixes
// such as "Number.float" or "Binary.gzip" included), String and Number values
// stay in StringValue and binary values are copied byte for byte. The list
// fields, reserved by SQS and always empty, are dropped.
func Attributes(in map[string]events.SQSMessageAttribute) map[string]sqstypes.MessageAttributeValue {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]sqstypes.MessageAttributeValue, len(in))
	for name, a := range in {
		v := sqstypes.MessageAttributeValue{DataType: aws.String(a.DataType), BinaryValue: slices.Clone(a.BinaryValue)}
		if a.StringValue != nil {
			v.StringValue = aws.String(*a.StringValue)
		}
		out[name] = v
	}
	return out
}

// AttributeText is an attribute's value as the processor reads a key from
// it: a String or Number value as it is, a Binary value in standard base64,
// "" for an attribute without a value.
func AttributeText(a events.SQSMessageAttribute) string {
	if a.StringValue != nil {
		return *a.StringValue
	}
	if len(a.BinaryValue) > 0 {
		return base64.StdEncoding.EncodeToString(a.BinaryValue)
	}
	return ""
}

// OriginalMessageID is the record's sqs-dlq-original-message-id as the
// processor keys on it, and whether it has one. An attribute of that name
// with a value, of whatever data type, is the original id and must be sent
// on byte for byte: replacing it would change the key of every later replay.
func OriginalMessageID(rec events.SQSMessage) (string, bool) {
	a, ok := rec.MessageAttributes[AttrOriginalMessageID]
	if !ok || AttributeText(a) == "" {
		return "", false
	}
	return AttributeText(a), true
}

// String is a String attribute value.
func String(s string) sqstypes.MessageAttributeValue {
	return sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(s)}
}

// Number is a Number attribute value.
func Number(n int) sqstypes.MessageAttributeValue {
	return sqstypes.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(n))}
}

// Entry is one message to send. RecordID identifies it in SendBatch's result
// (for a Lambda record, its messageId). DelaySeconds 0 means the queue's own
// delay; GroupID, DeduplicationID and TraceHeader are sent only when set.
type Entry struct {
	RecordID        string
	Body            string
	Attributes      map[string]sqstypes.MessageAttributeValue
	DelaySeconds    int32
	GroupID         string
	DeduplicationID string
	// TraceHeader is sent as the AWSTraceHeader system attribute, so the
	// message stays in the X-Ray trace it came with. It is not counted by
	// Size: SQS counts system attributes against no limit of the message.
	TraceHeader string
}

// Size is the entry's size as SQS counts it against MaxMessageBytes and
// MaxBatchBytes: the body plus each attribute's name, data type and value.
func (e Entry) Size() int {
	n := len(e.Body)
	for name, v := range e.Attributes {
		n += attrSize(name, v)
	}
	return n
}

func attrSize(name string, v sqstypes.MessageAttributeValue) int {
	return len(name) + len(aws.ToString(v.DataType)) + len(aws.ToString(v.StringValue)) + len(v.BinaryValue)
}

// SetAttribute sets an attribute if the message has room for it: the name is
// already present, or adding it stays within MaxAttributes and MaxMessageBytes.
// It reports whether the attribute was set; the entry is unchanged otherwise.
// The Attributes map is modified in place, so clone it first if it is shared.
func (e *Entry) SetAttribute(name string, v sqstypes.MessageAttributeValue) bool {
	size := e.Size() + attrSize(name, v)
	old, exists := e.Attributes[name]
	if exists {
		size -= attrSize(name, old)
	} else if len(e.Attributes) >= MaxAttributes {
		return false
	}
	if size > MaxMessageBytes {
		return false
	}
	if e.Attributes == nil {
		e.Attributes = map[string]sqstypes.MessageAttributeValue{}
	}
	e.Attributes[name] = v
	return true
}

// SameQueue reports whether queueURL, https://sqs.<region>.amazonaws.com/<account>/<name>
// or any endpoint's /<account>/<name>, names the queue of arn, by account
// and name, and by region where the URL's host names one.
func SameQueue(queueURL, arn string) bool {
	parts := strings.Split(arn, ":")
	u, err := url.Parse(queueURL)
	if len(parts) != 6 || err != nil {
		return false
	}
	path := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(path) != 2 || path[0] != parts[4] || path[1] != parts[5] {
		return false
	}
	host := strings.Split(u.Hostname(), ".")
	switch {
	case len(host) >= 3 && host[0] == "sqs": // sqs.<region>.amazonaws.com
		return host[1] == parts[3]
	case len(host) >= 3 && host[1] == "queue": // the legacy <region>.queue.amazonaws.com
		return host[0] == parts[3]
	}
	return true
}
