package ops

import (
	"strings"
	"testing"
)

// TestCheckTheStore: each state of the table fails the store check (but
// "exists"), each with the command that fixes it.
func TestCheckTheStore(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		state  TableState
		status CheckStatus
		change string
	}{
		{TableExists, CheckOK, ""},
		{TableMissing, CheckFail, "aws dynamodb create-table --table-name orders-idem --attribute-definitions AttributeName=id,AttributeType=S --key-schema AttributeName=id,KeyType=HASH --billing-mode PAY_PER_REQUEST --region eu-west-1"},
		{TableNoTTL, CheckFail, "aws dynamodb update-time-to-live --table-name orders-idem --region eu-west-1 --time-to-live-specification Enabled=true,AttributeName=expiresAt"},
		{TableMisconfigured, CheckFail, "aws dynamodb create-table --table-name orders-idem-v2 "},
		{TableUnknown, CheckFail, "dynamodb:DescribeTable and dynamodb:DescribeTimeToLive on table orders-idem"},
	} {
		m := &Migration{Region: "eu-west-1", Store: &StoreCheck{Store: StoreDynamoDB, Table: "orders-idem", State: tt.state, Error: "what Check said"}}
		c := m.checkTheStore()
		if c.Status != tt.status || c.Name != checkStore {
			t.Errorf("%s: %s %s, want %s %s", tt.state, c.Name, c.Status, checkStore, tt.status)
		}
		changes := strings.Join(c.Change, "\n")
		if (tt.change == "") != (changes == "") || !strings.Contains(changes, tt.change) {
			t.Errorf("%s: change %q, want one with %q", tt.state, changes, tt.change)
		}
	}
}
