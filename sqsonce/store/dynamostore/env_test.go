package dynamostore_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// FromEnv requires the table, naming its variable, and builds the store on
// the table it names.
func TestFromEnv(t *testing.T) {
	t.Parallel()
	cfg := aws.Config{Region: "us-east-1"}
	for _, env := range []map[string]string{{}, {"IDEMPOTENCY_TABLE": ""}} {
		if s, err := dynamostore.FromEnv(envconfig.Map(env), cfg); err == nil || s != nil || !strings.Contains(err.Error(), "IDEMPOTENCY_TABLE") {
			t.Errorf("%v: %v, %v; want an error naming IDEMPOTENCY_TABLE", env, s, err)
		}
	}
	s, err := dynamostore.FromEnv(envconfig.Map(map[string]string{"IDEMPOTENCY_TABLE": "idem"}), cfg)
	if err != nil || s.Table() != "idem" {
		t.Fatalf("IDEMPOTENCY_TABLE=idem: %v, %v; want the store on table idem", s, err)
	}
}
