//go:build integration

package ops_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/internal/ops"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
)

// TestTheTableIsPartOfEveryCheck deletes a stack's idempotency table
// (issue 32): preflight fails naming the table and the create-table
// command, cutover refuses and changes nothing, status says the table is
// missing, and inspect, release, forget and status --locks exit with the
// missing-table code, not the missing key's.
func TestTheTableIsPartOfEveryCheck(t *testing.T) {
	t.Parallel()
	e := newMigrationEnv(t, map[string]string{"VisibilityTimeout": "180", "MessageRetentionPeriod": "345600"})
	dlq := e.output("DeadLetterQueueArn")
	e.setQueue(map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + dlq + `","maxReceiveCount":"5"}`})
	table := e.output("IdempotencyTableName")

	// With the table: the store's check passes, and so does preflight.
	got, r := e.checks("--stack", e.st.Name)
	if r.code != ops.ExitOK {
		t.Fatalf("preflight with the table: exit %d, want 0", r.code)
	}
	wantChecks(t, got, map[string]string{"store": "ok"})
	r = run(t, runOpts{}, "status", "--stack", e.st.Name)
	if r.code != ops.ExitOK || !strings.Contains(r.stdout, "table "+table+": exists\n") {
		t.Errorf("status with the table: exit %d, want 0 saying %q", r.code, "table "+table+": exists")
	}

	db := dynamodb.NewFromConfig(mototest.Config(t))
	enableTTL := "aws dynamodb update-time-to-live --table-name " + table + " --region us-east-1 --endpoint-url " + mototest.URL(t) + " --time-to-live-specification Enabled=true,AttributeName=expiresAt"

	// TTL off: the processor works, but nothing deletes a record; the
	// check fails, as Processor.Check does, with the command that turns
	// TTL on, and status says so.
	if _, err := db.UpdateTimeToLive(context.Background(), &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(table),
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String("expiresAt"), Enabled: aws.Bool(false)}}); err != nil {
		t.Fatal(err)
	}
	r = run(t, runOpts{}, "preflight", "--stack", e.st.Name)
	if r.code != ops.ExitCheckFailed || !strings.Contains(r.stdout, "FAIL  store: ") || !strings.Contains(r.stdout, "change: "+enableTTL+"\n") {
		t.Errorf("preflight with TTL off: exit %d, want %d naming %q", r.code, ops.ExitCheckFailed, enableTTL)
	}
	r = run(t, runOpts{}, "status", "--stack", e.st.Name)
	if r.code != ops.ExitOK || !strings.Contains(r.stdout, "table "+table+": TTL off") {
		t.Errorf("status with TTL off: exit %d, want 0 saying TTL is off", r.code)
	}

	if _, err := db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
		t.Fatal(err)
	}

	createTable := "aws dynamodb create-table --table-name " + table + " --attribute-definitions AttributeName=id,AttributeType=S --key-schema AttributeName=id,KeyType=HASH --billing-mode PAY_PER_REQUEST --region us-east-1 --endpoint-url " + mototest.URL(t)
	r = run(t, runOpts{}, "preflight", "--stack", e.st.Name)
	if r.code != ops.ExitCheckFailed {
		t.Errorf("preflight without the table: exit %d, want %d", r.code, ops.ExitCheckFailed)
	}
	for _, want := range []string{
		"FAIL  store: table " + table + " in region us-east-1 does not exist: every message would fail",
		"change: " + createTable + "\n",
		"aws dynamodb wait table-exists --table-name " + table + " --region us-east-1 --endpoint-url " + mototest.URL(t) + "\n",
		enableTTL + "\n",
		"1 check failed: make the changes above",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("preflight without the table does not say %q", want)
		}
	}
	if !strings.Contains(r.stderr, "1 check failed (store)") {
		t.Errorf("preflight's stderr does not name the store check: %q", r.stderr)
	}
	var rep struct {
		Migration ops.Migration `json:"migration"`
		Passed    bool          `json:"passed"`
	}
	r = run(t, runOpts{}, "preflight", "--stack", e.st.Name, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("preflight --json: %v", err)
	}
	if rep.Passed || rep.Migration.Store == nil || rep.Migration.Store.State != ops.TableMissing || rep.Migration.Store.Table != table {
		t.Errorf("preflight --json without the table: passed %v, store %+v; want not passed, table %s missing", rep.Passed, rep.Migration.Store, table)
	}

	// cutover refuses, names the fix, and changes nothing.
	stackMapping := e.stackMapping()
	r = run(t, runOpts{}, "cutover", "--stack", e.st.Name, "--yes")
	if r.code != ops.ExitRefused || !strings.Contains(r.stderr, "1 preflight check fails (store); nothing was changed") || !strings.Contains(r.stderr, "change: "+createTable) {
		t.Errorf("cutover without the table: exit %d, want %d naming the store check and create-table", r.code, ops.ExitRefused)
	}
	if c, s := e.state(e.consumerMapping), e.state(stackMapping); c != "Enabled" || s != "Disabled" {
		t.Errorf("a refused cutover changed the mappings: consumer %s, stack %s; want Enabled, Disabled", c, s)
	}

	r = run(t, runOpts{}, "status", "--stack", e.st.Name)
	if r.code != ops.ExitOK || !strings.Contains(r.stdout, "table "+table+": MISSING") {
		t.Errorf("status without the table: exit %d, want 0 saying the table is missing", r.code)
	}
	for _, args := range [][]string{
		{"inspect", "k"},
		{"release", "--force", "k"},
		{"forget", "--yes", "k"},
		{"status", "--locks"},
		{"status", "--pending"},
	} {
		r = run(t, runOpts{}, append(append([]string{}, args...), "--stack", e.st.Name)...)
		if r.code != ops.ExitNoTable || !strings.Contains(r.stderr, table) || !strings.Contains(r.stderr, "no such table") || strings.Contains(r.stderr, "no record") {
			t.Errorf("%s without the table: exit %d, want %d naming table %s as missing", args[0], r.code, ops.ExitNoTable, table)
		}
	}
}
