package dynamostore_test

import (
	"strings"
	"testing"

	"github.com/sqs-once/sqs-once/internal/docs"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// tableDoc is the page whose commands and template the tests run, so that
// what a reader copies is what was tested.
const tableDoc = "docs/table.md"

// tableDocBlock returns the one fenced code block of docs/table.md whose
// info string is lang and whose text holds marker.
func tableDocBlock(t testing.TB, lang, marker string) string {
	t.Helper()
	return docs.CodeBlock(t, tableDoc, lang, marker)
}

// TestTableDocNamesTheSchema keeps the page's commands and template on the
// attribute names the store writes; the integration tests run them.
func TestTableDocNamesTheSchema(t *testing.T) {
	t.Parallel()
	sh := tableDocBlock(t, "sh", "aws dynamodb create-table")
	for _, want := range []string{
		"--attribute-definitions AttributeName=" + dynamostore.AttrID + ",AttributeType=S ",
		"--key-schema AttributeName=" + dynamostore.AttrID + ",KeyType=HASH ",
		"--billing-mode PAY_PER_REQUEST",
		"aws dynamodb wait table-exists",
		"--time-to-live-specification Enabled=true,AttributeName=" + dynamostore.AttrExpiresAt + "\n",
	} {
		if !strings.Contains(sh, want) {
			t.Errorf("%s: the commands do not say %q:\n%s", tableDoc, want, sh)
		}
	}
	yaml := tableDocBlock(t, "yaml", "AWS::DynamoDB::Table")
	for _, want := range []string{
		"        - AttributeName: " + dynamostore.AttrID + "\n          AttributeType: S\n",
		"        - AttributeName: " + dynamostore.AttrID + "\n          KeyType: HASH\n",
		"      TimeToLiveSpecification:\n        AttributeName: " + dynamostore.AttrExpiresAt + "\n        Enabled: true\n",
		"dynamodb:UpdateItem", "dynamodb:GetItem", "sqs:ChangeMessageVisibility", "sqs:SendMessage",
	} {
		if !strings.Contains(yaml, want) {
			t.Errorf("%s: the template does not say %q", tableDoc, want)
		}
	}
}
