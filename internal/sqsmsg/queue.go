package sqsmsg

import (
	"fmt"
	"strings"
)

// QueueURLFromARN is the queue URL the SQS API expects for the queue
// arn:<partition>:sqs:<region>:<account>:<name>, such as a record's
// eventSourceARN: https://sqs.<region>.amazonaws.com/<account>/<name>, or
// amazonaws.com.cn in the aws-cn partition. The SDK sends a request to its
// configured endpoint whatever the URL's host; the URL names the queue.
func QueueURLFromARN(arn string) (string, error) {
	p := strings.Split(arn, ":")
	if len(p) != 6 || p[0] != "arn" || p[2] != "sqs" || p[3] == "" || p[4] == "" || p[5] == "" {
		return "", fmt.Errorf("sqsmsg: %q is not an SQS queue ARN: want arn:aws:sqs:<region>:<account>:<name>", arn)
	}
	domain := "amazonaws.com"
	if p[1] == "aws-cn" {
		domain = "amazonaws.com.cn"
	}
	return fmt.Sprintf("https://sqs.%s.%s/%s/%s", p[3], domain, p[4], p[5]), nil
}
