package dedupe

import (
	"regexp"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestAcquireConditionAdmitsOnlyAbsentOrExpiredRecords(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_700_000_000_123)
	expr, err := acquireExpression(now)
	if err != nil {
		t.Fatal(err)
	}
	cond := *expr.Condition()
	names := expr.Names()
	values := expr.Values()

	// Resolve placeholders so the test reads the condition DynamoDB evaluates.
	cond = regexp.MustCompile(`[#:][0-9a-z]+`).ReplaceAllStringFunc(cond, func(ph string) string {
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
	want := "(attribute_not_exists (id)) OR ((status = 'PROCESSING') AND (lockExpiresAt < 1700000000123)) OR ((status = 'COMPLETED') AND (expiresAt < 1700000000))"
	if cond != want {
		t.Errorf("condition\n got %s\nwant %s", cond, want)
	}
}
