//go:build integration

package templatetest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/samstack"
	"github.com/sqs-once/sqs-once/internal/docs"
	"github.com/sqs-once/sqs-once/internal/local/cfnlint"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// The test of docs/table.md's template lives here, not beside the store:
// deploying it needs samstack (CloudFormation, S3) and reading its policy
// needs IAM, which the product module does not require.

// tableDoc is the page whose commands and template the tests run, so that
// what a reader copies is what was tested.
const tableDoc = "docs/table.md"

// tableDocBlock returns the one fenced code block of docs/table.md whose
// info string is lang and whose text holds marker.
func tableDocBlock(t testing.TB, lang, marker string) string {
	t.Helper()
	return docs.CodeBlock(t, tableDoc, lang, marker)
}

// checkTable runs Processor.Check on table through the DynamoDB store (a
// *dynamodb.Client from cfg), as a deploy step would.
func checkTable(t *testing.T, cfg aws.Config, table string) error {
	t.Helper()
	st := dynamostore.New(dynamodb.NewFromConfig(cfg), table)
	p, err := sqsonce.NewConsumer(sqsonce.ConsumerConfig{Config: sqsonce.Config{Store: st, KeyPrefix: "check", Logger: slog.New(slog.DiscardHandler)}, AWS: cfg}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p.Check(context.Background())
}

// TestCheckDocsTableTemplate lints docs/table.md's template with cfn-lint,
// deploys it to moto_server, checks the table it made, and reads back the
// policy it made: the processor's calls, each on its own resource.
func TestCheckDocsTableTemplate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "table.yaml")
	if err := os.WriteFile(file, []byte(tableDocBlock(t, "yaml", "AWS::DynamoDB::Table")), 0o644); err != nil {
		t.Fatal(err)
	}
	cfnLint(t, cfnlint.Template{Name: "the template of " + tableDoc, Path: file})
	if t.Failed() {
		t.FailNow()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	cfg := mototest.Config(t)
	consumed := "arn:aws:sqs:" + cfg.Region + ":123456789012:orders"
	operator := "arn:aws:sqs:" + cfg.Region + ":123456789012:orders-operator"
	st, err := samstack.Deploy(ctx, cfg, mototest.Name("tabledoc"), file, map[string]string{"ConsumedQueueArn": consumed, "OperatorQueueArn": operator})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range st.Adaptations {
		t.Logf("moto_server: %s", a)
	}
	table, err := st.Output("IdempotencyTableName")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkTable(t, cfg, table); err != nil {
		t.Errorf("Check on the template's table: %v", err)
	}

	described, err := dynamodb.NewFromConfig(cfg).DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	policyARN, err := st.Output("ProcessorPolicyArn")
	if err != nil {
		t.Fatal(err)
	}
	got := policyStatements(t, cfg, policyARN)
	want := map[string]string{
		"IdempotencyLock": fmt.Sprint([]string{"dynamodb:GetItem", "dynamodb:UpdateItem"}, " on ", []string{aws.ToString(described.Table.TableArn)}),
		"ConsumedQueue":   fmt.Sprint([]string{"sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes"}, " on ", []string{consumed}),
		"OperatorQueue":   fmt.Sprint([]string{"sqs:SendMessage"}, " on ", []string{operator}),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the template's policy allows\n%v\nwant\n%v", got, want)
	}
}

// policyStatements reads the default version of the managed policy at arn
// and returns each Allow statement as "<actions> on <resources>" by Sid.
func policyStatements(t *testing.T, cfg aws.Config, arn string) map[string]string {
	t.Helper()
	ctx := context.Background()
	client := iam.NewFromConfig(cfg)
	pol, err := client.GetPolicy(ctx, &iam.GetPolicyInput{PolicyArn: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	ver, err := client.GetPolicyVersion(ctx, &iam.GetPolicyVersionInput{PolicyArn: aws.String(arn), VersionId: pol.Policy.DefaultVersionId})
	if err != nil {
		t.Fatal(err)
	}
	// IAM returns the document URL-encoded.
	raw, err := url.PathUnescape(aws.ToString(ver.PolicyVersion.Document))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Statement []struct {
			Sid      string
			Effect   string
			Action   oneOrMany
			Resource oneOrMany
		}
	}
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		t.Fatalf("policy document %s: %v", raw, err)
	}
	out := map[string]string{}
	for _, s := range doc.Statement {
		if s.Effect != "Allow" {
			t.Errorf("statement %s: effect %s", s.Sid, s.Effect)
		}
		slices.Sort(s.Action)
		out[s.Sid] = fmt.Sprint([]string(s.Action), " on ", []string(s.Resource))
	}
	return out
}

// oneOrMany is a policy element that is a string or a list of them.
type oneOrMany []string

func (o *oneOrMany) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*o = []string{one}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(o))
}
