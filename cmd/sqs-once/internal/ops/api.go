package ops

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// SQSAPI is the part of the SQS client the commands use.
type SQSAPI interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// DynamoAPI is the part of the DynamoDB client the record commands use:
// what the processor's store (dynamostore.Store) calls, with the operator's
// calls of its store.Admin methods.
type DynamoAPI interface {
	dynamostore.AdminAPI
}

// MetricsAPI reads the queues' age metric: SQS itself does not say how old
// its oldest message is, only CloudWatch's ApproximateAgeOfOldestMessage does.
type MetricsAPI interface {
	GetMetricStatistics(ctx context.Context, in *cloudwatch.GetMetricStatisticsInput, optFns ...func(*cloudwatch.Options)) (*cloudwatch.GetMetricStatisticsOutput, error)
}

// StackAPI finds a stack's outputs and its processor function.
type StackAPI interface {
	DescribeStacks(ctx context.Context, in *cloudformation.DescribeStacksInput, optFns ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error)
	ListStackResources(ctx context.Context, in *cloudformation.ListStackResourcesInput, optFns ...func(*cloudformation.Options)) (*cloudformation.ListStackResourcesOutput, error)
}

// FunctionAPI reads the processor's environment, where KEY_PREFIX is.
type FunctionAPI interface {
	GetFunctionConfiguration(ctx context.Context, in *lambda.GetFunctionConfigurationInput, optFns ...func(*lambda.Options)) (*lambda.GetFunctionConfigurationOutput, error)
}

// MappingAPI is the part of the Lambda client preflight and cutover use:
// the functions' timeouts and environment, and the event source mappings
// on the queue.
type MappingAPI interface {
	FunctionAPI
	ListEventSourceMappings(ctx context.Context, in *lambda.ListEventSourceMappingsInput, optFns ...func(*lambda.Options)) (*lambda.ListEventSourceMappingsOutput, error)
	GetEventSourceMapping(ctx context.Context, in *lambda.GetEventSourceMappingInput, optFns ...func(*lambda.Options)) (*lambda.GetEventSourceMappingOutput, error)
	UpdateEventSourceMapping(ctx context.Context, in *lambda.UpdateEventSourceMappingInput, optFns ...func(*lambda.Options)) (*lambda.UpdateEventSourceMappingOutput, error)
}

var (
	_ SQSAPI      = (*sqs.Client)(nil)
	_ DynamoAPI   = (*dynamodb.Client)(nil)
	_ MetricsAPI  = (*cloudwatch.Client)(nil)
	_ StackAPI    = (*cloudformation.Client)(nil)
	_ FunctionAPI = (*lambda.Client)(nil)
	_ MappingAPI  = (*lambda.Client)(nil)
)
