package sqsonce

import (
	"strings"
	"testing"
	"time"
)

func TestQueueWarnings(t *testing.T) {
	t.Parallel()
	redrive := `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:dlq","maxReceiveCount":5}`
	tests := []struct {
		name    string
		attrs   map[string]string
		timeout time.Duration
		want    []string // substrings, one per warning, in order
	}{
		{"safe", map[string]string{"VisibilityTimeout": "180", "RedrivePolicy": redrive, "MessageRetentionPeriod": "345600"}, 30 * time.Second, nil},
		{"exactly six times", map[string]string{"VisibilityTimeout": "180", "RedrivePolicy": redrive, "MessageRetentionPeriod": "900"}, 30 * time.Second, nil},
		{"visibility too short", map[string]string{"VisibilityTimeout": "30", "RedrivePolicy": redrive, "MessageRetentionPeriod": "345600"}, 30 * time.Second, []string{"VisibilityTimeout is 30s"}},
		{"no redrive policy", map[string]string{"VisibilityTimeout": "180", "MessageRetentionPeriod": "345600"}, 30 * time.Second, []string{"no redrive policy"}},
		{"unreadable redrive policy", map[string]string{"VisibilityTimeout": "180", "RedrivePolicy": "{", "MessageRetentionPeriod": "345600"}, 30 * time.Second, []string{"no redrive policy"}},
		{"expires before the DLQ", map[string]string{"VisibilityTimeout": "180", "RedrivePolicy": redrive, "MessageRetentionPeriod": "600"}, 30 * time.Second, []string{"MessageRetentionPeriod is 10m0s, under maxReceiveCount (5)"}},
		{"all three", map[string]string{"VisibilityTimeout": "10", "RedrivePolicy": redrive, "MessageRetentionPeriod": "40"}, 30 * time.Second, []string{"VisibilityTimeout", "MessageRetentionPeriod"}},
		{"unknown timeout checks the rest", map[string]string{"VisibilityTimeout": "1"}, 0, []string{"no redrive policy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := queueWarnings(tt.attrs, tt.timeout)
			if len(got) != len(tt.want) {
				t.Fatalf("warnings %q, want %d", got, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %d = %q, want it to say %q", i, got[i], w)
				}
			}
		})
	}
}
