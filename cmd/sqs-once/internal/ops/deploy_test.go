//go:build integration

package ops_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/internal/ops"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
)

func TestResolveFromStack(t *testing.T) {
	t.Parallel()
	st := stack(t)
	cfg := mototest.Config(t)
	got, err := ops.Resolve(context.Background(), cloudformation.NewFromConfig(cfg), lambda.NewFromConfig(cfg), ops.Targets{Stack: st.Name})
	if err != nil {
		t.Fatal(err)
	}
	want := ops.Targets{
		Stack: st.Name, MainQueue: output(t, "MainQueueUrl"), DeadLetter: output(t, "DeadLetterQueueUrl"),
		OperatorQueue: output(t, "OperatorQueueUrl"), Table: output(t, "IdempotencyTableName"),
		KeyPrefix: st.Name + "-processor", KeyPrefixFrom: "processor environment",
		HashKeys: false, HashKeysFrom: "processor environment",
		// The template's processor has STORE=dynamodb.
		Store: ops.StoreDynamoDB, StoreFrom: "processor environment",
		// The template's DedupeWindow default, 86400 s, as DEDUPE_WINDOW.
		DedupeWindow: 24 * time.Hour, DedupeWindowFrom: "the processor's DEDUPE_WINDOW",
	}
	if got != want {
		t.Errorf("Resolve(--stack %s) =\n%+v\nwant\n%+v", st.Name, got, want)
	}
	// A flag wins over the stack.
	got, err = ops.Resolve(context.Background(), cloudformation.NewFromConfig(cfg), lambda.NewFromConfig(cfg), ops.Targets{Stack: st.Name, KeyPrefix: "mine", Table: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if got.KeyPrefix != "mine" || got.KeyPrefixFrom != "flag" || got.Table != "t" || got.MainQueue != want.MainQueue {
		t.Errorf("flags did not win over the stack: %+v", got)
	}
	if _, err := ops.Resolve(context.Background(), cloudformation.NewFromConfig(cfg), lambda.NewFromConfig(cfg), ops.Targets{Stack: "no-such-stack"}); ops.ExitCode(err) != ops.ExitNotFound {
		t.Errorf("Resolve of a missing stack: %v, want ErrNotFound", err)
	}
}
