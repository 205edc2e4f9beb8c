package storeenv_test

import (
	"strings"
	"testing"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/storeenv"
)

// DynamoDB unless told otherwise; an unknown store refused, naming the
// variable.
func TestFromEnvDynamoDB(t *testing.T) {
	for _, env := range []map[string]string{{}, {"STORE": "dynamodb"}} {
		if s, err := storeenv.FromEnv(envconfig.Map(env)); s != nil || err != nil {
			t.Errorf("%v: %v, %v; want no store (DynamoDB on IDEMPOTENCY_TABLE), no error", env, s, err)
		}
	}
	_, err := storeenv.FromEnv(envconfig.Map(map[string]string{"STORE": "memcached"}))
	if err == nil || !strings.Contains(err.Error(), "STORE") {
		t.Errorf("STORE=memcached: %v; want an error naming STORE", err)
	}
}
