//go:build integration

package sqsonce

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// TestLockRecordsTheProtocolDidNotWriteAreNamedAsSuch: the function does
// not run under a record the protocol did not write, and the error names
// the record and what is wrong with it, never a date made up from a missing
// attribute.
func TestLockRecordsTheProtocolDidNotWriteAreNamedAsSuch(t *testing.T) {
	t.Parallel()
	d := newLockDynamo(t)
	e := d.env()
	l := e.locker(t, e.uncounted)
	tests := []struct {
		name    string
		item    map[string]types.AttributeValue
		problem string
	}{
		{"unknown status", map[string]types.AttributeValue{"status": &types.AttributeValueMemberS{Value: "DONE"}}, `status is "DONE"`},
		{"no status", map[string]types.AttributeValue{"payload": &types.AttributeValueMemberS{Value: "x"}}, `status is ""`},
		{"lock without expiry", map[string]types.AttributeValue{"status": &types.AttributeValueMemberS{Value: "PROCESSING"}}, "PROCESSING record without a numeric lockExpiresAt"},
		{"completion without window", map[string]types.AttributeValue{"status": &types.AttributeValueMemberS{Value: "COMPLETED"}}, "COMPLETED record without a numeric expiresAt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := lockID(tt.name)
			tt.item[dynamostore.AttrID] = &types.AttributeValueMemberS{Value: id}
			d.putItem(t, tt.item)
			ran := false
			res := l.do(context.Background(), tt.name, "", 0, noResult(func(context.Context) error { ran = true; return nil }))
			var rec *store.RecordError
			if ran || res.outcome != notAcquired || !errors.As(res.err, &rec) || !errors.Is(res.err, ErrMisconfigured) {
				t.Fatalf("outcome %v ran %v err %v; want not-acquired with a RecordError", res.outcome, ran, res.err)
			}
			if msg := res.err.Error(); !strings.Contains(msg, tt.problem) || !strings.Contains(msg, id) || strings.Contains(msg, "1970") || strings.Contains(msg, "0001") {
				t.Errorf("message %q should name the record %s and the problem %q, and no made-up date", msg, id, tt.problem)
			}
		})
	}
}
