package storeenv_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/storeenv"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// DynamoDB unless told otherwise; an unknown store refused, naming the
// variable.
func TestFromEnvDynamoDB(t *testing.T) {
	cfg := aws.Config{Region: "eu-west-1"}
	for _, env := range []map[string]string{{"IDEMPOTENCY_TABLE": "t"}, {"STORE": "dynamodb", "IDEMPOTENCY_TABLE": "t"}} {
		s, err := storeenv.FromEnv(envconfig.Map(env), cfg, nil)
		if d, ok := s.(*dynamostore.Store); !ok || err != nil || d.Table() != "t" {
			t.Errorf("%v: %v, %v; want the DynamoDB store on table t, no error", env, s, err)
		}
	}
	// The table is required with the DynamoDB store, and only with it.
	for _, env := range []map[string]string{{}, {"STORE": "dynamodb"}} {
		if _, err := storeenv.FromEnv(envconfig.Map(env), cfg, nil); err == nil || !strings.Contains(err.Error(), "IDEMPOTENCY_TABLE") {
			t.Errorf("%v: %v; want an error naming IDEMPOTENCY_TABLE", env, err)
		}
	}
	if _, err := storeenv.FromEnv(envconfig.Map(map[string]string{"STORE": "redis"}), cfg, nil); err != nil && strings.Contains(err.Error(), "IDEMPOTENCY_TABLE") {
		t.Errorf("STORE=redis: %v; want no word of IDEMPOTENCY_TABLE", err)
	}
	_, err := storeenv.FromEnv(envconfig.Map(map[string]string{"STORE": "memcached"}), cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "STORE") {
		t.Errorf("STORE=memcached: %v; want an error naming STORE", err)
	}
}
