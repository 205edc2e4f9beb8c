package ops

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/sqsmsg"
)

// Queues reads and moves the stack's messages.
type Queues struct {
	SQS SQSAPI
	// Metrics gives the age of the oldest message; nil leaves it unknown.
	Metrics MetricsAPI
	// MetricsEndpoint is the URL Metrics calls in place of AWS's own
	// (AWS_ENDPOINT_URL), "" for AWS's: an emulator there may not serve
	// CloudWatch at all, which is not a fault to report (metricUnavailable).
	MetricsEndpoint string
	Now             func() time.Time
}

// QueueStatus is one queue's depth and age.
type QueueStatus struct {
	Name      string `json:"name"`
	URL       string `json:"url"`
	Visible   int    `json:"visible"`
	InFlight  int    `json:"inFlight"`
	Delayed   int    `json:"delayed"`
	OldestAge *int64 `json:"oldestAgeSeconds,omitempty"`
	// AgeNote says why OldestAge is missing: AgeNotAvailable when the
	// endpoint does not serve the metric.
	AgeNote string `json:"ageNote,omitempty"`
	// AgeError is the SDK's error when reading the age failed: what
	// status --verbose adds to AgeNotAvailable.
	AgeError string `json:"ageError,omitempty"`
}

// MetricNotAvailable is what status says of a metric when the CloudWatch
// endpoint does not serve it at all: an emulator's (moto_server answers 404
// in a protocol the SDK cannot decode), not AWS failing to answer.
const MetricNotAvailable = "not available on this endpoint"

// AgeNotAvailable is QueueStatus.AgeNote when the endpoint does not serve
// the age metric (MetricNotAvailable).
const AgeNotAvailable = MetricNotAvailable

// metricNote is what status says of a CloudWatch read that failed with
// err, and the SDK's error kept for --verbose and --json: an endpoint set
// in place of AWS's (custom) that does not serve CloudWatch is
// MetricNotAvailable, any other failure (a role without the permission,
// throttling) the error itself.
func metricNote(err error, custom bool) (note, sdkErr string) {
	if metricUnavailable(err, custom) {
		return MetricNotAvailable, err.Error()
	}
	return "unknown: " + awsError("CloudWatch", err).Error(), err.Error()
}

// QueueName is the last segment of a queue URL (or of a queue ARN): the
// name CloudWatch's QueueName dimension uses.
func QueueName(queueURL string) string {
	if strings.HasPrefix(queueURL, "arn:") {
		return queueURL[strings.LastIndex(queueURL, ":")+1:]
	}
	if u, err := url.Parse(queueURL); err == nil && u.Path != "" {
		return path.Base(u.Path)
	}
	return queueURL
}

// Status reads a queue's approximate depth from SQS and the age of its
// oldest message from CloudWatch (the newest datapoint of the last 15
// minutes; SQS publishes the metric every minute).
func (q *Queues) Status(ctx context.Context, name, queueURL string) (QueueStatus, error) {
	st := QueueStatus{Name: name, URL: queueURL}
	out, err := q.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(queueURL),
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		return st, awsError("read "+name+" queue "+QueueName(queueURL), err)
	}
	num := func(a sqstypes.QueueAttributeName) int {
		n, _ := strconv.Atoi(out.Attributes[string(a)])
		return n
	}
	st.Visible = num(sqstypes.QueueAttributeNameApproximateNumberOfMessages)
	st.InFlight = num(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)
	st.Delayed = num(sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed)
	if q.Metrics == nil {
		st.AgeNote = "unknown (no CloudWatch client)"
		return st, nil
	}
	now := q.Now()
	m, err := q.Metrics.GetMetricStatistics(ctx, &cloudwatch.GetMetricStatisticsInput{
		Namespace:  aws.String("AWS/SQS"),
		MetricName: aws.String("ApproximateAgeOfOldestMessage"),
		Dimensions: []cwtypes.Dimension{{Name: aws.String("QueueName"), Value: aws.String(QueueName(queueURL))}},
		StartTime:  aws.Time(now.Add(-15 * time.Minute)),
		EndTime:    aws.Time(now),
		Period:     aws.Int32(60),
		Statistics: []cwtypes.Statistic{cwtypes.StatisticMaximum},
	})
	if err != nil {
		// The depth is still worth showing: the age needs
		// cloudwatch:GetMetricStatistics, which a role may lack.
		st.AgeNote, st.AgeError = metricNote(err, q.MetricsEndpoint != "")
		return st, nil
	}
	var newest *cwtypes.Datapoint
	for i := range m.Datapoints {
		d := &m.Datapoints[i]
		if d.Timestamp != nil && d.Maximum != nil && (newest == nil || d.Timestamp.After(*newest.Timestamp)) {
			newest = d
		}
	}
	if newest == nil {
		st.AgeNote = "no datapoint in the last 15 minutes (an empty, idle queue publishes none)"
		return st, nil
	}
	age := int64(*newest.Maximum)
	st.OldestAge = &age
	return st, nil
}

// Message is a received message in the terms an operator reads.
type Message struct {
	MessageID     string               `json:"messageId"`
	SentAt        *time.Time           `json:"sentAt,omitempty"`
	ReceiveCount  int                  `json:"receiveCount"`
	GroupID       string               `json:"groupId,omitempty"`
	Reason        string               `json:"reason,omitempty"`
	ReplayCount   string               `json:"replayCount,omitempty"`
	OriginalID    string               `json:"originalMessageId,omitempty"`
	FirstSent     *time.Time           `json:"firstSent,omitempty"`
	Attributes    map[string]Attribute `json:"attributes,omitempty"`
	Body          *string              `json:"body,omitempty"`
	BodyBytes     int                  `json:"bodyBytes"`
	receiptHandle string
	raw           sqstypes.Message
}

// Attribute is a message attribute: its data type and its value as text (a
// binary value in base64).
type Attribute struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

func attrText(v sqstypes.MessageAttributeValue) string {
	if v.StringValue != nil {
		return *v.StringValue
	}
	if len(v.BinaryValue) > 0 {
		return base64.StdEncoding.EncodeToString(v.BinaryValue)
	}
	return ""
}

func viewMessage(m sqstypes.Message, withBody bool) Message {
	v := Message{
		MessageID: aws.ToString(m.MessageId), BodyBytes: len(aws.ToString(m.Body)),
		receiptHandle: aws.ToString(m.ReceiptHandle), raw: m,
	}
	sys := m.Attributes
	if ms, err := strconv.ParseInt(sys[string(sqstypes.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
		t := time.UnixMilli(ms).UTC()
		v.SentAt = &t
	}
	v.ReceiveCount, _ = strconv.Atoi(sys[string(sqstypes.MessageSystemAttributeNameApproximateReceiveCount)])
	v.GroupID = sys[string(sqstypes.MessageSystemAttributeNameMessageGroupId)]
	if len(m.MessageAttributes) > 0 {
		v.Attributes = map[string]Attribute{}
	}
	for name, a := range m.MessageAttributes {
		v.Attributes[name] = Attribute{Type: aws.ToString(a.DataType), Value: attrText(a)}
	}
	v.Reason = v.Attributes[sqsmsg.AttrReason].Value
	v.ReplayCount = v.Attributes[sqsmsg.AttrReplayCount].Value
	v.OriginalID = v.Attributes[sqsmsg.AttrOriginalMessageID].Value
	if ms, err := strconv.ParseInt(v.Attributes[sqsmsg.AttrFirstSent].Value, 10, 64); err == nil {
		t := time.UnixMilli(ms).UTC()
		v.FirstSent = &t
	}
	if withBody {
		v.Body = aws.String(aws.ToString(m.Body))
	}
	return v
}

// receive asks for up to n messages with every attribute, hidden for
// visibility. It long-polls one second: a short poll may answer empty from
// a queue that has messages on other servers.
func (q *Queues) receive(ctx context.Context, queueURL string, n int, visibility time.Duration) ([]sqstypes.Message, error) {
	out, err := q.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(queueURL),
		MaxNumberOfMessages:         int32(min(max(n, 1), 10)),
		VisibilityTimeout:           int32(visibility / time.Second),
		WaitTimeSeconds:             1,
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
	})
	if err != nil {
		return nil, awsError("receive from "+QueueName(queueURL), err)
	}
	return out.Messages, nil
}

// showAgain makes messages visible at once, ten per call. It runs on a
// context of its own: after an interrupt the messages must not stay hidden
// for the rest of their visibility timeout. A message whose handle is no
// longer valid is visible again already.
func (q *Queues) showAgain(ctx context.Context, queueURL string, handles []string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var failed int
	for start := 0; start < len(handles); start += 10 {
		var entries []sqstypes.ChangeMessageVisibilityBatchRequestEntry
		for i, h := range handles[start:min(start+10, len(handles))] {
			entries = append(entries, sqstypes.ChangeMessageVisibilityBatchRequestEntry{
				Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(h), VisibilityTimeout: 0,
			})
		}
		out, err := q.SQS.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
		if err != nil {
			failed += len(entries)
			continue
		}
		failed += len(out.Failed)
	}
	if failed > 0 {
		return fmt.Errorf("%s could not be made visible again in %s; they reappear when their visibility timeout ends: %w",
			count(failed, "message", "messages"), QueueName(queueURL), ErrAWS)
	}
	return nil
}

// Peek shows up to n messages without consuming them: each receive hides
// what it returned (so the next receive brings others), and at the end every
// one is made visible again. A receive counts against the queue's
// maxReceiveCount: peeking the main queue brings its messages closer to the
// dead-letter queue.
func (q *Queues) Peek(ctx context.Context, queueURL string, n int, withBody bool) ([]Message, error) {
	var msgs []Message
	var handles []string
	seen := map[string]bool{}
	var err error
	for len(msgs) < n && ctx.Err() == nil {
		var got []sqstypes.Message
		got, err = q.receive(ctx, queueURL, n-len(msgs), time.Minute)
		if err != nil || len(got) == 0 {
			break
		}
		fresh := 0
		for _, m := range got {
			handles = append(handles, aws.ToString(m.ReceiptHandle))
			if seen[aws.ToString(m.MessageId)] {
				continue
			}
			seen[aws.ToString(m.MessageId)] = true
			fresh++
			msgs = append(msgs, viewMessage(m, withBody))
		}
		if fresh == 0 {
			break
		}
	}
	if back := q.showAgain(ctx, queueURL, handles); err == nil {
		err = back
	}
	sort.SliceStable(msgs, func(i, j int) bool {
		a, b := msgs[i].SentAt, msgs[j].SentAt
		return a != nil && b != nil && a.Before(*b)
	})
	return msgs, err
}
