package durablestub_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go"

	"github.com/sqs-once/sqs-once/internal/local/durablestub"
)

// The stub applies the documented rules the durable target's tests lean
// on: were it to accept any name, those tests could not see a bad one.
func TestStubAppliesTheDocumentedRules(t *testing.T) {
	stub, err := durablestub.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stub.Close() })
	client := lambda.NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(stub.URL),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""), RetryMaxAttempts: 1})
	ctx := context.Background()
	invoke := func(function, qualifier, name, payload string) error {
		in := &lambda.InvokeInput{FunctionName: aws.String(function), InvocationType: lambdatypes.InvocationTypeEvent, Payload: []byte(payload)}
		if qualifier != "" {
			in.Qualifier = aws.String(qualifier)
		}
		if name != "" {
			in.DurableExecutionName = aws.String(name)
		}
		_, err := client.Invoke(ctx, in)
		return err
	}
	code := func(err error) string {
		var ae smithy.APIError
		if errors.As(err, &ae) {
			return ae.ErrorCode()
		}
		return ""
	}
	for _, name := range []string{strings.Repeat("n", 65), "commande-été", "a b", "a/b", "a.b"} {
		if err := invoke("orders", "1", name, `{}`); code(err) != "InvalidParameterValueException" {
			t.Errorf("name %q: %v, want InvalidParameterValueException", name, err)
		}
	}
	if err := invoke("orders", "", "n", `{}`); code(err) != "InvalidParameterValueException" {
		t.Errorf("unqualified: %v, want InvalidParameterValueException", err)
	}
	if err := invoke("orders", "1", strings.Repeat("n", 64), `{"a":1}`); err != nil {
		t.Fatalf("a 64-character name: %v", err)
	}
	if err := invoke("orders:1", "", strings.Repeat("n", 64), `{"a":1}`); err != nil {
		t.Errorf("the same name and payload, qualified in the name: %v, want the execution returned", err)
	}
	var taken *lambdatypes.DurableExecutionAlreadyStartedException
	if err := invoke("orders", "1", strings.Repeat("n", 64), `{"a":2}`); !errors.As(err, &taken) {
		t.Errorf("the same name, another payload: %v, want DurableExecutionAlreadyStartedException", err)
	}
	execs := stub.Executions()
	if len(execs) != 1 || execs[strings.Repeat("n", 64)].Invokes != 2 || stub.Refusals() != 1 {
		t.Errorf("executions %d, refusals %d; want one execution invoked twice, one refusal", len(execs), stub.Refusals())
	}
	list, err := client.ListDurableExecutionsByFunction(ctx, &lambda.ListDurableExecutionsByFunctionInput{FunctionName: aws.String("orders"), DurableExecutionName: aws.String("nnn")})
	if err != nil || len(list.DurableExecutions) != 1 {
		t.Fatalf("list by a part of the name: %+v, %v; want the execution", list, err)
	}
	got, err := client.GetDurableExecution(ctx, &lambda.GetDurableExecutionInput{DurableExecutionArn: list.DurableExecutions[0].DurableExecutionArn})
	if err != nil || aws.ToString(got.InputPayload) != `{"a":1}` || got.Status != lambdatypes.ExecutionStatusRunning {
		t.Errorf("get: %+v, %v; want the first payload, RUNNING", got, err)
	}
}
