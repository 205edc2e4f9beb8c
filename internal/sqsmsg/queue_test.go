package sqsmsg

import "testing"

func TestQueueURLFromARN(t *testing.T) {
	t.Parallel()
	for arn, want := range map[string]string{
		"arn:aws:sqs:us-east-1:123456789012:demo-forwarded":     "https://sqs.us-east-1.amazonaws.com/123456789012/demo-forwarded",
		"arn:aws-cn:sqs:cn-north-1:123456789012:q.fifo":         "https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q.fifo",
		"arn:aws-us-gov:sqs:us-gov-west-1:123456789012:orders":  "https://sqs.us-gov-west-1.amazonaws.com/123456789012/orders",
		"arn:aws:sns:us-east-1:123456789012:topic":              "",
		"https://sqs.us-east-1.amazonaws.com/123456789012/name": "",
		"arn:aws:sqs:us-east-1:123456789012:":                   "",
		"arn:aws:sqs::123456789012:orders":                      "",
		"arn:aws:sqs:us-east-1::orders":                         "",
		"arn:aws:sqs:us-east-1:123456789012:orders:extra":       "",
		"nra:aws:sqs:us-east-1:123456789012:orders":             "",
		"": "",
	} {
		got, err := QueueURLFromARN(arn)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("QueueURLFromARN(%q) = %q, %v; want %q", arn, got, err, want)
		}
	}
}

// A URL derived from a queue's ARN names that queue.
func TestQueueURLFromARNIsTheSameQueue(t *testing.T) {
	t.Parallel()
	arn := "arn:aws:sqs:eu-west-1:123456789012:orders.fifo"
	url, err := QueueURLFromARN(arn)
	if err != nil || !SameQueue(url, arn) {
		t.Errorf("QueueURLFromARN(%q) = %q, %v: not the same queue", arn, url, err)
	}
}
