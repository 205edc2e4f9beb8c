package sqsonce

import (
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

func TestInProgressDelay(t *testing.T) {
	for _, tt := range []struct {
		remaining time.Duration
		r         float64
		want      time.Duration
	}{
		{30 * time.Second, 0, 31 * time.Second},
		{30 * time.Second, 0.999, 34 * time.Second},    // jitter up to a tenth: 3 s
		{-5 * time.Second, 0, time.Second},             // expired: back in a second
		{2 * time.Second, 0.5, 4 * time.Second},        // jitter at least a second: 3.5 s, up
		{time.Hour, 0.999, time.Hour + 61*time.Second}, // jitter at most a minute
		{1500 * time.Millisecond, 0, 3 * time.Second},  // whole seconds, up
	} {
		if got := inProgressDelay(tt.remaining, tt.r); got != tt.want {
			t.Errorf("inProgressDelay(%v, %v) = %v, want %v", tt.remaining, tt.r, got, tt.want)
		}
	}
}

// Records run one after another when they share a FIFO message group or a
// key; everything else runs concurrently, in units of one.
func TestUnits(t *testing.T) {
	std := func(key string) keyed {
		return keyed{msg: events.SQSMessage{EventSourceARN: "arn:aws:sqs:us-east-1:1:q"}, key: key, ok: key != ""}
	}
	fifo := func(group, key string) keyed {
		return keyed{msg: events.SQSMessage{EventSourceARN: "arn:aws:sqs:us-east-1:1:q.fifo", Attributes: map[string]string{"MessageGroupId": group}}, key: key, ok: true}
	}
	for _, tt := range []struct {
		name string
		recs []keyed
		want [][]int
	}{
		{"distinct keys", []keyed{std("a"), std("b"), std("c")}, [][]int{{0}, {1}, {2}}},
		{"copies of a key, in batch order", []keyed{std("a"), std("b"), std("a"), std("a")}, [][]int{{0, 2, 3}, {1}}},
		{"records without a key stand alone", []keyed{std(""), std("")}, [][]int{{0}, {1}}},
		{"FIFO groups", []keyed{fifo("g1", "a"), fifo("g2", "b"), fifo("g1", "c")}, [][]int{{0, 2}, {1}}},
		{"a key joins two groups", []keyed{fifo("g1", "a"), fifo("g2", "b"), fifo("g2", "a"), fifo("g3", "d")}, [][]int{{0, 1, 2}, {3}}},
	} {
		if got := units(tt.recs); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: units = %v, want %v", tt.name, got, tt.want)
		}
	}
}
