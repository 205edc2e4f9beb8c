package sqsonce_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqs-once/sqs-once/internal/local/mototest"
)

// exampleTable is the table the runnable examples name, as a user's code
// would: it is created before they run.
const exampleTable = "idempotency"

// exampleQueue is the queue ExampleConfig_target forwards to.
const exampleQueue = "orders-once"

// TestMain runs the package's tests and examples against a moto_server
// started for them: the examples use the AWS configuration a Lambda function
// would load, pointed at it.
func TestMain(m *testing.M) {
	mototest.MainWith(m, func(cfg aws.Config) error {
		// The queue the target example forwards to.
		if _, err := sqs.NewFromConfig(cfg).CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(exampleQueue)}); err != nil {
			return err
		}
		_, err := dynamodb.NewFromConfig(cfg).CreateTable(context.Background(), &dynamodb.CreateTableInput{
			TableName:            aws.String(exampleTable),
			BillingMode:          types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		})
		return err
	})
}
