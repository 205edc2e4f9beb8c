//go:build integration

package replay

import (
	"fmt"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/internal/sqsmsg"
)

// The per-record accounting stays exact with concurrent calls against SQS
// (moto): injected per-entry failures spread over many calls, and a whole
// destination failing, leave exactly those records in batchItemFailures;
// every other one arrives once.
func TestConcurrentAccountingAgainstSQS(t *testing.T) {
	t.Parallel()
	atMax := map[string]events.SQSMessageAttribute{sqsmsg.AttrReplayCount: str("Number", "3")}
	failing := map[string]bool{}
	var wantFailed []string
	for _, i := range []int{0, 9, 10, 47, 48, 99, 120, 149} {
		failing[fmt.Sprint("r body ", i)] = true
		wantFailed = append(wantFailed, fmt.Sprint("r-", i))
	}
	tests := []struct {
		name       string
		failQueue  bool
		wantFailed []string
		wantMain   int
		wantOp     int
	}{
		{"per-entry failures across calls", false, wantFailed, 150 - len(wantFailed), 25},
		{"the operator queue fails as a whole", true, append(slices.Clone(wantFailed), recordIDs(25, "o")...), 150 - len(wantFailed), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{})
			b.api.failBodies = failing
			if tt.failQueue {
				b.api.failQueue = b.opURL
			}
			resp := b.handle(append(records(150, "r", nil), records(25, "o", atMax)...)...)
			var failed []string
			for _, f := range resp.BatchItemFailures {
				failed = append(failed, f.ItemIdentifier)
			}
			slices.Sort(failed)
			want := slices.Sorted(slices.Values(tt.wantFailed))
			if !slices.Equal(failed, want) {
				t.Errorf("batchItemFailures %v, want %v", failed, want)
			}
			for _, q := range []struct {
				url  string
				want int
			}{{b.mainURL, tt.wantMain}, {b.opURL, tt.wantOp}} {
				seen := map[string]bool{}
				for _, m := range b.receive(q.url, q.want) {
					body := aws.ToString(m.Body)
					if seen[body] || failing[body] {
						t.Errorf("%s arrived twice, or although it failed", body)
					}
					seen[body] = true
				}
			}
			b.empty(b.mainURL)
			b.empty(b.opURL)
		})
	}
}

func recordIDs(n int, prefix string) []string {
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("%s-%d", prefix, i))
	}
	return ids
}
