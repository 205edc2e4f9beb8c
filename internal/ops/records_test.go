package ops_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/dedupe"
	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/ops"
	"github.com/sqs-once/sqs-once/internal/testclock"
)

// recordsEnv is a fresh key on the stack's table, written by the processor's
// own store (dedupe.Store) under the stack's prefix, and a clock.
type recordsEnv struct {
	t     *testing.T
	stack string
	key   string
	store *dedupe.Store
	db    *dynamodb.Client
	table string
	clock *testclock.Clock
}

func newRecordsEnv(t *testing.T) *recordsEnv {
	st := stack(t)
	cfg := mototest.Config(t)
	db := dynamodb.NewFromConfig(cfg)
	table := output(t, "IdempotencyTableName")
	// Whole milliseconds: the record keeps the lock's expiry in them.
	clock := testclock.New(time.Now().Truncate(time.Second))
	return &recordsEnv{t: t, stack: st.Name, key: mototest.Name("order"), store: dedupe.NewStore(db, table, st.Name+"-processor"),
		db: db, table: table, clock: clock}
}

func (e *recordsEnv) acquire(lock time.Duration) dedupe.Lease {
	e.t.Helper()
	lease, err := e.store.Acquire(context.Background(), e.key, e.clock.Now(), e.clock.Now().Add(lock))
	if err != nil {
		e.t.Fatal(err)
	}
	return lease
}

func (e *recordsEnv) item() map[string]ddbtypes.AttributeValue {
	e.t.Helper()
	out, err := e.db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(e.table), ConsistentRead: aws.Bool(true),
		Key: map[string]ddbtypes.AttributeValue{"id": &ddbtypes.AttributeValueMemberS{Value: dedupe.RecordID(e.stack+"-processor", e.key)}},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out.Item
}

func (e *recordsEnv) status() string {
	e.t.Helper()
	if v, ok := e.item()["status"].(*ddbtypes.AttributeValueMemberS); ok {
		return v.Value
	}
	return "(none)"
}

func (e *recordsEnv) run(stdin string, args ...string) result {
	e.t.Helper()
	return run(e.t, runOpts{stdin: stdin, now: e.clock.Now}, args...)
}

func TestInspectInPlainWords(t *testing.T) {
	t.Parallel()
	e := newRecordsEnv(t)
	lease := e.acquire(5 * time.Minute)
	r := e.run("", "inspect", "--stack", e.stack, e.key)
	if r.code != ops.ExitOK {
		t.Fatalf("inspect exit %d", r.code)
	}
	for _, want := range []string{
		"record id    " + e.stack + "-processor#" + e.key,
		"PROCESSING: a processor holds the lock",
		"owner        " + lease.Owner,
		fmt.Sprintf("fence        %d", lease.Fence),
		"live, expires " + lease.LockExpiresAt.UTC().Format(time.RFC3339) + " (in 5m0s)",
	} {
		if !strings.Contains(words(r.stdout), words(want)) {
			t.Errorf("inspect says\n%s\nwithout %q", r.stdout, want)
		}
	}

	e.clock.Advance(6 * time.Minute)
	r = e.run("", "inspect", "--stack", e.stack, "--json", e.key)
	var rec ops.Record
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil || r.code != 0 {
		t.Fatalf("inspect --json: exit %d, %v", r.code, err)
	}
	if rec.Status != dedupe.StatusProcessing || rec.Live || rec.Owner != lease.Owner || rec.Fence != lease.Fence {
		t.Errorf("inspect --json after the lock expired = %+v", rec)
	}
	if r := e.run("", "inspect", "--stack", e.stack, e.key); !strings.Contains(r.stdout, "lock expired") || !strings.Contains(r.stdout, "(1m0s ago)") {
		t.Errorf("an expired lock is not said to be expired:\n%s", r.stdout)
	}

	// A completed key: the window's end.
	lease = e.acquire(time.Minute)
	if err := e.store.Complete(context.Background(), lease, e.clock.Now(), 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	r = e.run("", "inspect", "--stack", e.stack, e.key)
	if !strings.Contains(r.stdout, "COMPLETED: the handler succeeded") || !strings.Contains(words(r.stdout), "window ends "+e.clock.Now().Add(24*time.Hour).UTC().Format(time.RFC3339)+" (in 24h0m0s)") {
		t.Errorf("inspect of a completed key:\n%s", r.stdout)
	}

	if r := e.run("", "inspect", "--stack", e.stack, "no-such-"+e.key); r.code != ops.ExitNotFound || !strings.Contains(r.stderr, "no record") {
		t.Errorf("inspect of a key without a record: exit %d, %s", r.code, r.stderr)
	}
}

func TestReleaseRefusesALiveLock(t *testing.T) {
	t.Parallel()
	e := newRecordsEnv(t)
	lease := e.acquire(5 * time.Minute)
	before := e.item()

	r := e.run("", "release", "--stack", e.stack, e.key)
	if r.code != ops.ExitRefused {
		t.Fatalf("release of a live lock: exit %d, want %d", r.code, ops.ExitRefused)
	}
	for _, want := range []string{"for 5m0s more", "--force risks a second side effect"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, r.stderr)
		}
	}
	if after := e.item(); itemText(after) != itemText(before) {
		t.Errorf("a refused release changed the record:\n%v\n->\n%v", before, after)
	}

	// Once the lock has expired, release frees it and keeps the fence: the
	// next acquisition's fence is one more.
	e.clock.Advance(5*time.Minute + time.Millisecond)
	r = e.run("", "release", "--stack", e.stack, e.key)
	if r.code != ops.ExitOK || !strings.Contains(r.stdout, "its lock had expired") {
		t.Fatalf("release of an expired lock: exit %d", r.code)
	}
	if got := e.status(); got != string(dedupe.StatusReleased) {
		t.Errorf("status after release = %s, want RELEASED", got)
	}
	next, err := e.store.Acquire(context.Background(), e.key, e.clock.Now(), e.clock.Now().Add(time.Minute))
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	if next.Fence != lease.Fence+1 || next.TookOver {
		t.Errorf("acquisition after release: fence %d (took over %t), want %d, not a takeover", next.Fence, next.TookOver, lease.Fence+1)
	}

	// --force releases a live lock, and says what it risked.
	r = e.run("", "release", "--stack", e.stack, "--force", "--json", e.key)
	var out struct {
		Released, Forced bool
		Was              ops.Record
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != 0 || !out.Released || !out.Forced || out.Was.Owner != next.Owner {
		t.Fatalf("release --force: exit %d, %+v, %v", r.code, out, err)
	}
	if got := e.status(); got != string(dedupe.StatusReleased) {
		t.Errorf("status after release --force = %s", got)
	}
	// The holder whose lock was forced away learns it at its next renewal,
	// which cancels its handler.
	if _, err := e.store.Renew(context.Background(), next, e.clock.Now().Add(time.Minute)); !errors.Is(err, dedupe.ErrLockLost) {
		t.Errorf("the forced-out holder's renewal: %v, want ErrLockLost", err)
	}
	if r := e.run("", "release", "--stack", e.stack, e.key); r.code != ops.ExitRefused || !strings.Contains(r.stderr, "is RELEASED, not PROCESSING") {
		t.Errorf("release of a released key: exit %d %s", r.code, r.stderr)
	}
}

// takeOverFirst is the table with another holder that takes the key over
// between release's read and its write.
type takeOverFirst struct {
	ops.DynamoAPI
	before func()
}

func (d takeOverFirst) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	d.before()
	return d.DynamoAPI.UpdateItem(ctx, in, opt...)
}

func TestReleaseIsConditionalOnTheLockRead(t *testing.T) {
	t.Parallel()
	e := newRecordsEnv(t)
	e.acquire(time.Minute)
	e.clock.Advance(2 * time.Minute)
	var successor dedupe.Lease
	recs := &ops.Records{Table: e.table, Prefix: e.stack + "-processor", Now: e.clock.Now, DB: takeOverFirst{e.db, func() {
		successor = e.acquire(time.Minute) // the expired lock taken over by a redelivery
	}}}
	_, err := recs.Release(context.Background(), e.key, false)
	if !errors.Is(err, ops.ErrChanged) || ops.ExitCode(err) != ops.ExitRefused {
		t.Fatalf("release racing a takeover: %v, want ErrChanged", err)
	}
	rec, err := (&ops.Records{DB: e.db, Table: e.table, Prefix: e.stack + "-processor", Now: e.clock.Now}).Get(context.Background(), e.key)
	if err != nil || rec.Status != dedupe.StatusProcessing || rec.Owner != successor.Owner || !rec.Live {
		t.Errorf("the successor's lock was touched: %+v, %v", rec, err)
	}
}

func TestReleaseLostAnswerIsItsOwn(t *testing.T) {
	t.Parallel()
	e := newRecordsEnv(t)
	e.acquire(time.Minute)
	e.clock.Advance(2 * time.Minute)
	proxy, cfg := proxied(t)
	// The release is applied, its answer lost: the SDK's retry meets the
	// RELEASED record it wrote itself.
	proxy.Script("UpdateItem", faultproxy.FailAfter)
	r := run(t, runOpts{now: e.clock.Now, cfg: &cfg}, "release", "--stack", e.stack, e.key)
	if r.code != ops.ExitOK || proxy.Pending() != 0 {
		t.Fatalf("release with a lost answer: exit %d, fault pending %d", r.code, proxy.Pending())
	}
	if got := e.status(); got != string(dedupe.StatusReleased) {
		t.Errorf("status = %s", got)
	}
}

func TestForgetAsksFirst(t *testing.T) {
	t.Parallel()
	e := newRecordsEnv(t)
	lease := e.acquire(time.Minute)
	if r := e.run("y\n", "forget", "--stack", e.stack, e.key); r.code != ops.ExitRefused || !strings.Contains(r.stderr, "see `release`") {
		t.Errorf("forget of a PROCESSING key: exit %d", r.code)
	}
	if err := e.store.Complete(context.Background(), lease, e.clock.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, answer := range []string{"n\n", "", "maybe\n"} {
		r := e.run(answer, "forget", "--stack", e.stack, e.key)
		if r.code != ops.ExitRefused || !strings.Contains(r.stderr, "[y/N]") {
			t.Errorf("forget answered %q: exit %d, want %d after a question", answer, r.code, ops.ExitRefused)
		}
		if got := e.status(); got != string(dedupe.StatusCompleted) {
			t.Fatalf("forget answered %q changed the record to %s", answer, got)
		}
	}
	r := e.run("y\n", "forget", "--stack", e.stack, e.key)
	if r.code != ops.ExitOK || !strings.Contains(r.stdout, "COMPLETED") || !strings.Contains(r.stdout, "forgot") {
		t.Fatalf("forget answered y: exit %d", r.code)
	}
	if got := e.status(); got != "(none)" {
		t.Errorf("record after forget: %s", got)
	}
	// The key runs again: a fresh acquisition, not a duplicate.
	lease = e.acquire(time.Minute)
	if err := e.store.Complete(context.Background(), lease, e.clock.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	if r := e.run("", "forget", "--stack", e.stack, "--yes", "--json", e.key); r.code != ops.ExitOK || strings.Contains(r.stderr, "[y/N]") || !strings.Contains(r.stdout, `"forgotten": true`) {
		t.Errorf("forget --yes: exit %d, asked anyway or no JSON", r.code)
	}
	if r := e.run("y\n", "forget", "--stack", e.stack, e.key); r.code != ops.ExitNotFound {
		t.Errorf("forget of a forgotten key: exit %d, want %d", r.code, ops.ExitNotFound)
	}
}

// itemText is an item's attributes and values, comparable as a string.
func itemText(item map[string]ddbtypes.AttributeValue) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(item)) {
		switch v := item[k].(type) {
		case *ddbtypes.AttributeValueMemberS:
			fmt.Fprintf(&b, "%s=S:%s ", k, v.Value)
		case *ddbtypes.AttributeValueMemberN:
			fmt.Fprintf(&b, "%s=N:%s ", k, v.Value)
		default:
			fmt.Fprintf(&b, "%s=%T ", k, v)
		}
	}
	return b.String()
}

// words is s with every run of spaces made one: the columns' widths are the
// layout's business.
func words(s string) string { return strings.Join(strings.Fields(s), " ") }
