package instantaws_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/logging"

	"github.com/sqs-once/sqs-once/internal/instantaws"
)

// TestSDKReadsTheAnswers: the SDK's clients take the canned answers as
// the services' own (a success, a refusal carrying the item, SQS's JSON
// protocol), with the CRC32 DynamoDB's client checks, and every call is
// counted under its operation.
func TestSDKReadsTheAnswers(t *testing.T) {
	srv := instantaws.Start()
	defer srv.Close()
	cfg := aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "secret", ""),
		BaseEndpoint: aws.String(srv.URL()),
		// The SDK logs a response whose CRC32 does not match.
		Logger: logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
			t.Errorf("SDK log: "+string(c)+" "+format, v...)
		}),
	}
	ddb := dynamodb.NewFromConfig(cfg)
	ctx := context.Background()
	in := &dynamodb.UpdateItemInput{
		TableName: aws.String("t"), Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "k"}},
		UpdateExpression: aws.String("SET #s = :s"),
	}
	if _, err := ddb.UpdateItem(ctx, in); err != nil {
		t.Fatalf("UpdateItem with no answer set = %v; want the empty success", err)
	}
	srv.Answer(instantaws.UpdateItem, instantaws.ConditionalCheckFailed(`{"status":{"S":"COMPLETED"}}`))
	_, err := ddb.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("UpdateItem = %v; want a ConditionalCheckFailedException", err)
	}
	if s, ok := ccf.Item["status"].(*types.AttributeValueMemberS); !ok || s.Value != "COMPLETED" {
		t.Fatalf("refusal's item = %#v; want status COMPLETED", ccf.Item)
	}
	if _, err := sqs.NewFromConfig(cfg).GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(srv.URL() + "/123456789012/q")}); err != nil {
		t.Fatalf("GetQueueAttributes = %v", err)
	}
	for op, want := range map[string]int64{instantaws.UpdateItem: 2, instantaws.GetQueueAttributes: 1, instantaws.GetItem: 0, "": 3} {
		if got := srv.Calls(op); got != want {
			t.Errorf("Calls(%q) = %d, want %d", op, got, want)
		}
	}
	if got := srv.CallsOf("DynamoDB_20120810"); got != 2 {
		t.Errorf("CallsOf(DynamoDB) = %d, want 2", got)
	}
	if got := srv.CallsOf("AmazonSQS"); got != 1 {
		t.Errorf("CallsOf(SQS) = %d, want 1", got)
	}
}
