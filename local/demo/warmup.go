package demo

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// warmUp makes one cheap read call to each service the stack's creation
// and the run reach on a fresh moto_server, and returns a channel closed
// once all have answered. moto_server loads a service's code on the
// service's first call, and CloudFormation's loads that of some thirty
// services: on a cold server that made CreateStack most of the stack's
// creation (18.6 s cold against 1.7 s warm on a loaded machine). Made
// while the SAM translator still runs, in its own process, that loading
// overlaps the translation instead of following it. The answers, and any
// error, do not matter: a call that fails has loaded the code all the same,
// and the deploy that follows reports real failures.
func warmUp(ctx context.Context, awsCfg aws.Config) <-chan struct{} {
	calls := []func(){
		func() {
			_, _ = cloudformation.NewFromConfig(awsCfg).ListStacks(ctx, &cloudformation.ListStacksInput{})
		},
		func() {
			_, _ = s3.NewFromConfig(awsCfg, func(o *s3.Options) { o.UsePathStyle = true }).ListBuckets(ctx, &s3.ListBucketsInput{})
		},
		func() { _, _ = lambda.NewFromConfig(awsCfg).ListFunctions(ctx, &lambda.ListFunctionsInput{}) },
		func() { _, _ = iam.NewFromConfig(awsCfg).ListRoles(ctx, &iam.ListRolesInput{}) },
		func() { _, _ = sqs.NewFromConfig(awsCfg).ListQueues(ctx, &sqs.ListQueuesInput{}) },
		func() { _, _ = dynamodb.NewFromConfig(awsCfg).ListTables(ctx, &dynamodb.ListTablesInput{}) },
	}
	return goAll(calls)
}

// warmUpDynamo is warmUp for a server that holds only the idempotency
// table's items (a partition): DynamoDB alone.
func warmUpDynamo(ctx context.Context, awsCfg aws.Config, url string) <-chan struct{} {
	cfg := awsCfg.Copy()
	cfg.BaseEndpoint = aws.String(url)
	return goAll([]func(){func() { _, _ = dynamodb.NewFromConfig(cfg).ListTables(ctx, &dynamodb.ListTablesInput{}) }})
}

// goAll runs calls side by side and closes the returned channel once all
// have returned.
func goAll(calls []func()) <-chan struct{} {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Go(c)
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	return done
}
