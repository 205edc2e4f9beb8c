//go:build integration

package ops_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/internal/ops"
	"github.com/sqs-once/sqs-once/cmd/sqs-once/samstack"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/testclock"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// hashedID is the key's record id as a processor with HASH_KEYS=on writes it.
func (e *recordsEnv) hashedID() string { return store.RecordID(e.prefix, sqsonce.HashKey(e.key)) }

// TestHashKeysFlag: on the stack, whose processor does not hash keys, a
// record written under a hashed id (as a processor with HASH_KEYS=on writes
// it) is found, released and forgotten by its plain key with --hash-keys;
// without the flag the not-found message says where the record is and
// which flag finds it, and the reverse for a plain record looked up hashed.
func TestHashKeysFlag(t *testing.T) {
	t.Parallel()
	e := newRecordsEnv(t)
	hash := sqsonce.HashKey(e.key)
	lease := acquire(t, e.store, e.hashedID(), e.clock.Now(), e.clock.Now().Add(5*time.Minute))

	r := e.run("", "inspect", "--stack", e.stack, e.key)
	if r.code != ops.ExitNotFound {
		t.Fatalf("inspect of a hashed record by its plain key, unhashed: exit %d, want %d", r.code, ops.ExitNotFound)
	}
	for _, want := range []string{"record id " + e.id(), "found under the hashed id " + e.hashedID(), "pass --hash-keys"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the not-found message does not say %q:\n%s", want, r.stderr)
		}
	}

	r = e.run("", "inspect", "--stack", e.stack, "--hash-keys", e.key)
	if r.code != ops.ExitOK {
		t.Fatalf("inspect --hash-keys: exit %d", r.code)
	}
	for _, want := range []string{"key " + e.key, "key hash " + hash, "record id " + e.hashedID(), "owner " + lease.Owner, "PROCESSING: a processor holds the lock"} {
		if !strings.Contains(words(r.stdout), want) {
			t.Errorf("inspect --hash-keys says\n%s\nwithout %q", r.stdout, want)
		}
	}
	if want := `keys hashed (flag): key "` + e.key + `" is record id ` + e.hashedID(); !strings.Contains(r.stderr, want) {
		t.Errorf("inspect --hash-keys does not print the id it looked up, %q:\n%s", want, r.stderr)
	}
	r = e.run("", "inspect", "--stack", e.stack, "--hash-keys", "--json", e.key)
	var rec ops.Record
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil || rec.Key != e.key || rec.KeyHash != hash || rec.RecordID != e.hashedID() {
		t.Errorf("inspect --hash-keys --json: %+v, %v", rec, err)
	}
	// The hash from the logs, looked up as it is: the stack does not hash.
	if r := e.run("", "inspect", "--stack", e.stack, hash); r.code != ops.ExitOK || !strings.Contains(words(r.stdout), "record id "+e.hashedID()) {
		t.Errorf("inspect of the hash itself: exit %d", r.code)
	}

	// status --locks lists the id as it is, the hash, under a column
	// that says so.
	r = e.run("", "status", "--stack", e.stack, "--locks", "--hash-keys")
	if r.code != ops.ExitOK || !strings.Contains(r.stdout, "key hash") || !strings.Contains(r.stdout, hash) || !strings.Contains(r.stdout, "keys hashed (flag)") {
		t.Errorf("status --locks --hash-keys: exit %d, the lock's hash not listed as one:\n%s", r.code, r.stdout)
	}

	// release: refused while live, then freed under the hashed id.
	if r := e.run("", "release", "--stack", e.stack, "--hash-keys", e.key); r.code != ops.ExitRefused {
		t.Errorf("release --hash-keys of a live lock: exit %d, want %d", r.code, ops.ExitRefused)
	}
	e.clock.Advance(6 * time.Minute)
	r = e.run("", "release", "--stack", e.stack, "--hash-keys", e.key)
	if r.code != ops.ExitOK || !strings.Contains(r.stdout, "record "+e.hashedID()) {
		t.Fatalf("release --hash-keys of an expired lock: exit %d", r.code)
	}
	if got := readStatus(t, e, e.hashedID()); got != store.StatusReleased {
		t.Errorf("the hashed record after release: %s, want RELEASED", got)
	}

	// forget: the completed hashed record is deleted.
	e.complete(acquire(t, e.store, e.hashedID(), e.clock.Now(), e.clock.Now().Add(time.Minute)), time.Hour)
	r = e.run("", "forget", "--stack", e.stack, "--hash-keys", "--yes", e.key)
	if r.code != ops.ExitOK || !strings.Contains(r.stdout, "record "+e.hashedID()+" deleted") {
		t.Fatalf("forget --hash-keys: exit %d", r.code)
	}
	if got := readStatus(t, e, e.hashedID()); got != "" {
		t.Errorf("the hashed record after forget: %s, want none", got)
	}

	// The reverse: a plain record, looked up hashed.
	e.acquire(time.Minute)
	r = e.run("", "inspect", "--stack", e.stack, "--hash-keys", e.key)
	if r.code != ops.ExitNotFound || !strings.Contains(r.stderr, "found under the unhashed id "+e.id()) || !strings.Contains(r.stderr, "pass --hash-keys=false") {
		t.Errorf("inspect --hash-keys of a plain record: exit %d, without the way to it:\n%s", r.code, r.stderr)
	}
	// A key with no record under either id: the plain not-found words.
	r = e.run("", "inspect", "--stack", e.stack, "--hash-keys", "no-such-"+e.key)
	if r.code != ops.ExitNotFound || !strings.Contains(r.stderr, "never processed") || strings.Contains(r.stderr, "found under") {
		t.Errorf("inspect of a key without any record: exit %d:\n%s", r.code, r.stderr)
	}
}

// readStatus is the status of the record under id ("" when there is none).
func readStatus(t *testing.T, e *recordsEnv, id string) store.Status {
	t.Helper()
	rec, err := e.store.Read(context.Background(), id)
	if err != nil {
		return ""
	}
	return rec.Status
}

// TestHashKeysFromTheStack: on a stack deployed with HashKeys=on, the CLI
// reads HASH_KEYS from the processor and hashes the key without a flag;
// --hash-keys=false, given, wins over it and looks a hash up as it is.
func TestHashKeysFromTheStack(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := samstack.Deploy(ctx, cfg, mototest.Name("hashed"), filepath.Join("..", "..", "..", "..", "template.yaml"), map[string]string{"HashKeys": "on"})
	if err != nil {
		t.Fatalf("deploy template.yaml with HashKeys=on: %v", err)
	}
	table, err := st.Output("IdempotencyTableName")
	if err != nil {
		t.Fatal(err)
	}
	ddb := dynamostore.New(dynamodb.NewFromConfig(cfg), table)
	clock := testclock.New(time.Now().Truncate(time.Second))
	key := mototest.Name("order")
	id := store.RecordID(st.Name+"-processor", sqsonce.HashKey(key))
	acquire(t, ddb, id, clock.Now(), clock.Now().Add(5*time.Minute))

	r := run(t, runOpts{now: clock.Now}, "inspect", "--stack", st.Name, key)
	if r.code != ops.ExitOK || !strings.Contains(words(r.stdout), "record id "+id) {
		t.Fatalf("inspect on a stack that hashes keys: exit %d", r.code)
	}
	if want := `keys hashed (processor environment): key "` + key + `" is record id ` + id; !strings.Contains(r.stderr, want) {
		t.Errorf("inspect does not say %q:\n%s", want, r.stderr)
	}
	r = run(t, runOpts{now: clock.Now}, "inspect", "--stack", st.Name, "--hash-keys=false", sqsonce.HashKey(key))
	if r.code != ops.ExitOK || !strings.Contains(words(r.stdout), "record id "+id) || strings.Contains(r.stderr, "keys hashed") {
		t.Errorf("inspect --hash-keys=false of the hash: exit %d", r.code)
	}
	r = run(t, runOpts{now: clock.Now}, "status", "--stack", st.Name, "--locks")
	if r.code != ops.ExitOK || !strings.Contains(r.stdout, "keys hashed (processor environment)") || !strings.Contains(r.stdout, sqsonce.HashKey(key)) {
		t.Errorf("status --locks on a stack that hashes keys: exit %d:\n%s", r.code, r.stdout)
	}
}
