package dynamostore

import (
	"regexp"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

func TestLockAcquireConditionAdmitsOnlyAbsentOrExpiredRecords(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_700_000_000_123)
	expr, err := acquireExpression(store.AcquireRequest{ID: "p#k", Owner: "me", PayloadHash: "h", Now: now, LockUntil: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	names := expr.Names()
	values := expr.Values()

	// Resolve placeholders so the test reads what DynamoDB evaluates.
	resolve := func(s string) string {
		return regexp.MustCompile(`[#:][0-9a-z]+`).ReplaceAllStringFunc(s, func(ph string) string {
			if name, ok := names[ph]; ok {
				return name
			}
			switch v := values[ph].(type) {
			case *types.AttributeValueMemberS:
				return "'" + v.Value + "'"
			case *types.AttributeValueMemberN:
				return v.Value
			}
			t.Fatalf("placeholder %s has no value", ph)
			return ""
		})
	}
	want := "(attribute_not_exists (id)) OR (status = 'RELEASED') OR ((status = 'PROCESSING') AND (lockExpiresAt < 1700000000123)) OR ((status = 'COMPLETED') AND (expiresAt < 1700000000))"
	if cond := resolve(*expr.Condition()); cond != want {
		t.Errorf("condition\n got %s\nwant %s", cond, want)
	}
	// One call takes the lock and moves the fence on (from the clock on a
	// new record); TTL may delete the record an hour after the lock ends.
	wantUpdate := "REMOVE result, outbox\nSET lockExpiresAt = 1700000060123, expiresAt = 1700003661, status = 'PROCESSING', owner = 'me', payloadHash = 'h', fence = if_not_exists(fence, 1700000000123) + 1\n"
	if update := resolve(*expr.Update()); update != wantUpdate {
		t.Errorf("update\n got %q\nwant %q", update, wantUpdate)
	}
}
