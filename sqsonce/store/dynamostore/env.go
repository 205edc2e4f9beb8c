package dynamostore

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/retrybudget"
)

// EnvTable is the variable FromEnv reads: the table's name. Required.
const EnvTable = "IDEMPOTENCY_TABLE"

// FromEnv returns the store on the table EnvTable names, through a client
// built from cfg (config.LoadDefaultConfig's) as the deployed processor
// builds it: its retries share the call's budget, and a write DynamoDB
// answered is not retried for a transport quirk (own-retry recognition
// would absorb it, but not without a second write). lookup is
// os.LookupEnv, or a map's in a test. The error names the variable.
func FromEnv(lookup func(string) (string, bool), cfg aws.Config) (*Store, error) {
	r := envconfig.NewReader(lookup)
	table := r.Required(EnvTable)
	if err := r.Err(); err != nil {
		return nil, err
	}
	return New(newClient(cfg), table), nil
}

// withinBudget bounds one call's retries by ctx's deadline.
func withinBudget(ctx context.Context) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) { o.Retryer = retrybudget.Within(ctx, o.Retryer) }
}

// newClient is the processor's DynamoDB client on cfg.
func newClient(cfg aws.Config) *dynamodb.Client {
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.Retryer = retrybudget.Client(o.Retryer)
		o.APIOptions = append(o.APIOptions, retrybudget.SafeRequestBody)
	})
}
