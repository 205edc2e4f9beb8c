//go:build integration

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

	"github.com/sqs-once/sqs-once/cmd/sqs-once/internal/ops"
	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/testclock"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// recordsEnv is a fresh key on the stack's table, written by the processor's
// own store (dynamostore.Store) under the stack's prefix, and a clock.
type recordsEnv struct {
	t      *testing.T
	stack  string
	prefix string
	key    string
	store  *dynamostore.Store
	db     *dynamodb.Client
	table  string
	clock  *testclock.Clock
}

func newRecordsEnv(t *testing.T) *recordsEnv {
	st := stack(t)
	cfg := mototest.Config(t)
	db := dynamodb.NewFromConfig(cfg)
	table := output(t, "IdempotencyTableName")
	// Whole milliseconds: the record keeps the lock's expiry in them.
	clock := testclock.New(time.Now().Truncate(time.Second))
	return &recordsEnv{t: t, stack: st.Name, prefix: st.Name + "-processor", key: mototest.Name("order"),
		store: dynamostore.New(db, table), db: db, table: table, clock: clock}
}

// id is the key's record id under the stack's prefix.
func (e *recordsEnv) id() string { return store.RecordID(e.prefix, e.key) }

// acquire takes the key's lock for lock, as a processor does: a fresh owner.
func (e *recordsEnv) acquire(lock time.Duration) store.Lease {
	e.t.Helper()
	return acquire(e.t, e.store, e.id(), e.clock.Now(), e.clock.Now().Add(lock))
}

// complete records lease's key COMPLETED for window.
func (e *recordsEnv) complete(lease store.Lease, window time.Duration) {
	e.t.Helper()
	if err := e.store.Complete(context.Background(), lease, store.Completion{Until: e.clock.Now().Add(window)}); err != nil {
		e.t.Fatal(err)
	}
}

// records is the ops view of the stack's records, on db.
func (e *recordsEnv) records(db ops.DynamoAPI) *ops.Records {
	return &ops.Records{DB: db, Table: e.table, Prefix: e.prefix, Now: e.clock.Now}
}

// acquire takes id's lock from now until lockUntil with a new owner.
func acquire(t *testing.T, s store.Store, id string, now, lockUntil time.Time) store.Lease {
	t.Helper()
	lease, err := s.Acquire(context.Background(), store.AcquireRequest{ID: id, Owner: mototest.Name("owner"), Now: now, LockUntil: lockUntil})
	if err != nil {
		t.Fatalf("acquire %s: %v", id, err)
	}
	return lease
}

func (e *recordsEnv) item() map[string]ddbtypes.AttributeValue {
	e.t.Helper()
	out, err := e.db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(e.table), ConsistentRead: aws.Bool(true),
		Key: map[string]ddbtypes.AttributeValue{dynamostore.AttrID: &ddbtypes.AttributeValueMemberS{Value: e.id()}},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out.Item
}

func (e *recordsEnv) status() string {
	e.t.Helper()
	if v, ok := e.item()[dynamostore.AttrStatus].(*ddbtypes.AttributeValueMemberS); ok {
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
	if rec.Status != store.StatusProcessing || rec.Live || rec.Owner != lease.Owner || rec.Fence != lease.Fence {
		t.Errorf("inspect --json after the lock expired = %+v", rec)
	}
	if r := e.run("", "inspect", "--stack", e.stack, e.key); !strings.Contains(r.stdout, "lock expired") || !strings.Contains(r.stdout, "(1m0s ago)") {
		t.Errorf("an expired lock is not said to be expired:\n%s", r.stdout)
	}

	// A completed key: the window's end.
	lease = e.acquire(time.Minute)
	e.complete(lease, 24*time.Hour)
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
	if got := e.status(); got != string(store.StatusReleased) {
		t.Errorf("status after release = %s, want RELEASED", got)
	}
	next := e.acquire(time.Minute)
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
	if got := e.status(); got != string(store.StatusReleased) {
		t.Errorf("status after release --force = %s", got)
	}
	// The holder whose lock was forced away learns it at its next renewal,
	// which cancels its handler.
	if _, err := e.store.Renew(context.Background(), next, e.clock.Now().Add(time.Minute)); !errors.Is(err, sqsonce.ErrLockLost) {
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
	var successor store.Lease
	recs := e.records(takeOverFirst{e.db, func() {
		successor = e.acquire(time.Minute) // the expired lock taken over by a redelivery
	}})
	_, err := recs.Release(context.Background(), e.key, false)
	if !errors.Is(err, ops.ErrChanged) || ops.ExitCode(err) != ops.ExitRefused {
		t.Fatalf("release racing a takeover: %v, want ErrChanged", err)
	}
	// The refusal says what the record is now, and that nothing was written.
	for _, want := range []string{"is now PROCESSING, owner " + successor.Owner, "nothing was written, inspect it again"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	rec, err := e.records(e.db).Get(context.Background(), e.key)
	if err != nil || rec.Status != store.StatusProcessing || rec.Owner != successor.Owner || !rec.Live {
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
	if got := e.status(); got != string(store.StatusReleased) {
		t.Errorf("status = %s", got)
	}
}

func TestForgetAsksFirst(t *testing.T) {
	t.Parallel()
	e := newRecordsEnv(t)
	lease := e.acquire(time.Minute)
	if r := e.run("y\n", "forget", "--stack", e.stack, e.key); r.code != ops.ExitRefused || !strings.Contains(r.stderr, "see sqs-once release") {
		t.Errorf("forget of a PROCESSING key: exit %d", r.code)
	}
	e.complete(lease, time.Hour)
	for _, answer := range []string{"n\n", "", "maybe\n"} {
		r := e.run(answer, "forget", "--stack", e.stack, e.key)
		if r.code != ops.ExitRefused || !strings.Contains(r.stderr, "[y/N]") {
			t.Errorf("forget answered %q: exit %d, want %d after a question", answer, r.code, ops.ExitRefused)
		}
		if got := e.status(); got != string(store.StatusCompleted) {
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
	e.complete(lease, time.Hour)
	if r := e.run("", "forget", "--stack", e.stack, "--yes", "--json", e.key); r.code != ops.ExitOK || strings.Contains(r.stderr, "[y/N]") || !strings.Contains(r.stdout, `"forgotten": true`) {
		t.Errorf("forget --yes: exit %d, asked anyway or no JSON", r.code)
	}
	if r := e.run("y\n", "forget", "--stack", e.stack, e.key); r.code != ops.ExitNotFound {
		t.Errorf("forget of a forgotten key: exit %d, want %d", r.code, ops.ExitNotFound)
	}
}

// put writes the key's record by hand, attribute by attribute: a record
// as an older version of the processor, or someone else, wrote it.
func (e *recordsEnv) put(attrs map[string]ddbtypes.AttributeValue) {
	e.t.Helper()
	item := map[string]ddbtypes.AttributeValue{dynamostore.AttrID: &ddbtypes.AttributeValueMemberS{Value: e.id()}}
	maps.Copy(item, attrs)
	if _, err := e.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: item}); err != nil {
		e.t.Fatal(err)
	}
}

func attrS(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
func attrN(v int64) ddbtypes.AttributeValue {
	return &ddbtypes.AttributeValueMemberN{Value: fmt.Sprint(v)}
}

// TestReleaseForceWithoutFence: a live lock written before fencing (no
// fence attribute) is inspected and released like any other; the release
// used to be conditional on a fence the record does not have, and so was
// refused as "changed" though nothing had changed it.
func TestReleaseForceWithoutFence(t *testing.T) {
	t.Parallel()
	e := newRecordsEnv(t)
	until := e.clock.Now().Add(5 * time.Minute)
	e.put(map[string]ddbtypes.AttributeValue{
		dynamostore.AttrStatus: attrS(string(store.StatusProcessing)), "owner": attrS("before-fencing"),
		"lockExpiresAt": attrN(until.UnixMilli()), dynamostore.AttrExpiresAt: attrN(until.Add(time.Hour).Unix()),
	})
	if r := e.run("", "inspect", "--stack", e.stack, e.key); r.code != ops.ExitOK || !strings.Contains(words(r.stdout), "fence 0") || !strings.Contains(r.stdout, "PROCESSING: a processor holds the lock") {
		t.Errorf("inspect of a lock without a fence: exit %d", r.code)
	}
	if r := e.run("", "release", "--stack", e.stack, e.key); r.code != ops.ExitRefused || !strings.Contains(r.stderr, "for 5m0s more") {
		t.Errorf("release of a live lock without a fence, no --force: exit %d, want %d", r.code, ops.ExitRefused)
	}
	r := e.run("", "release", "--stack", e.stack, "--force", e.key)
	if r.code != ops.ExitOK || !strings.Contains(r.stdout, "FORCED") || !strings.Contains(r.stdout, "owner before-fencing, fence 0") {
		t.Fatalf("release --force of a live lock without a fence: exit %d, want %d", r.code, ops.ExitOK)
	}
	if got := e.status(); got != string(store.StatusReleased) {
		t.Errorf("status after release --force = %s, want RELEASED", got)
	}
	// The key is free at once, and its next fence starts from the clock.
	if next := e.acquire(time.Minute); next.TookOver || next.Fence != store.FenceSeed(e.clock.Now())+1 {
		t.Errorf("acquisition after the release: %+v", next)
	}
}

// TestLockWithoutExpiry: a PROCESSING record without lockExpiresAt is not
// one the protocol wrote; it is shown, and treated as live: release needs
// --force.
func TestLockWithoutExpiry(t *testing.T) {
	t.Parallel()
	e := newRecordsEnv(t)
	e.put(map[string]ddbtypes.AttributeValue{dynamostore.AttrStatus: attrS(string(store.StatusProcessing)), "owner": attrS("by-hand"), "fence": attrN(7)})
	r := e.run("", "inspect", "--stack", e.stack, e.key)
	if r.code != ops.ExitOK || !strings.Contains(r.stdout, "no expiry recorded") || !strings.Contains(words(r.stdout), "fence 7") {
		t.Errorf("inspect of a lock without an expiry: exit %d", r.code)
	}
	if r := e.run("", "release", "--stack", e.stack, e.key); r.code != ops.ExitRefused || !strings.Contains(r.stderr, "no expiry recorded") {
		t.Errorf("release of a lock without an expiry, no --force: exit %d, want %d", r.code, ops.ExitRefused)
	}
	if r := e.run("", "release", "--stack", e.stack, "--force", e.key); r.code != ops.ExitOK {
		t.Errorf("release --force of a lock without an expiry: exit %d", r.code)
	}
	if got := e.status(); got != string(store.StatusReleased) {
		t.Errorf("status after release --force = %s, want RELEASED", got)
	}
}

// TestForgetIsConditionalOnTheCompletionRead: a key forgotten and completed
// again between forget's read and its delete is not deleted.
func TestForgetIsConditionalOnTheCompletionRead(t *testing.T) {
	t.Parallel()
	e := newRecordsEnv(t)
	e.complete(e.acquire(time.Minute), time.Hour)
	var again store.Lease
	_, err := e.records(e.db).Forget(context.Background(), e.key, func(ops.Record) (bool, error) {
		// Another operator forgets it, and a redelivery completes it anew.
		if r := e.run("", "forget", "--stack", e.stack, "--yes", e.key); r.code != ops.ExitOK {
			t.Fatalf("the other forget: exit %d", r.code)
		}
		again = e.acquire(time.Minute)
		e.complete(again, time.Hour)
		return true, nil
	})
	if !errors.Is(err, ops.ErrChanged) || ops.ExitCode(err) != ops.ExitRefused || !strings.Contains(err.Error(), "is now COMPLETED, owner "+again.Owner) {
		t.Fatalf("forget racing a new completion: %v, want ErrChanged", err)
	}
	if rec, err := e.records(e.db).Get(context.Background(), e.key); err != nil || rec.Owner != again.Owner || rec.Status != store.StatusCompleted {
		t.Errorf("the new completion was touched: %+v, %v", rec, err)
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
