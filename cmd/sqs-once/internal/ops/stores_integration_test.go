//go:build integration

package ops_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/internal/ops"
	"github.com/sqs-once/sqs-once/internal/local/mariaserver"
	"github.com/sqs-once/sqs-once/internal/local/pgserver"
	"github.com/sqs-once/sqs-once/internal/local/redisserver"
	"github.com/sqs-once/sqs-once/internal/testclock"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/mysqlstore"
	"github.com/sqs-once/sqs-once/sqsonce/store/pgstore"
	"github.com/sqs-once/sqs-once/sqsonce/store/redisstore"
)

// TestRecordCommandsOnRedis runs inspect, release, forget and status
// --locks on a Redis store named by flags, with no AWS region: records the
// processor's store wrote are read, released and forgotten through the
// store's own calls.
func TestRecordCommandsOnRedis(t *testing.T) {
	t.Parallel()
	srv := redisserver.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = client.Close() })
	s, err := redisstore.New(client, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	recordCommands(t, s, "Redis redis://"+srv.Addr, "--store", "redis", "--redis-url", "redis://"+srv.Addr)
}

// TestRecordCommandsOnPostgres is the same on a PostgreSQL store: a
// library store, named by --store postgres, --database-url and --table.
func TestRecordCommandsOnPostgres(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	srv, err := pgserver.Start(ctx, pgserver.Options{})
	cancel()
	if err != nil {
		// Never skipped: the tier needs the server, and says how to get it.
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	pool, err := pgxpool.New(context.Background(), srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	const table = "orders_idem"
	if err := pgstore.CreateTable(t.Context(), pool, table); err != nil {
		t.Fatal(err)
	}
	recordCommands(t, pgstore.New(pool, table), "PostgreSQL table "+table, "--store", "postgres", "--database-url", srv.DSN, "--table", table)

	// The store's own failure (no such table) is the store's error, exit 1,
	// never a key not found.
	r := run(t, runOpts{cfg: &aws.Config{}}, "inspect", "--store", "postgres", "--database-url", srv.DSN, "--table", "no_such_table", "--key-prefix", "p", "k")
	if r.code != ops.ExitError || !strings.Contains(r.stderr, "store call failed") || !strings.Contains(r.stderr, "no_such_table") {
		t.Errorf("inspect on a missing PostgreSQL table: exit %d, stderr %q; want exit %d naming the table", r.code, r.stderr, ops.ExitError)
	}
}

// TestRecordCommandsOnMySQL is the same on a MySQL store (MariaDB here):
// a library store, named by --store mysql, --database-url (the driver's
// DSN) and --table. The store's failures are the store's error, exit 1,
// and no message prints the DSN's password.
func TestRecordCommandsOnMySQL(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	srv, err := mariaserver.Start(ctx, mariaserver.Options{})
	cancel()
	if err != nil {
		// Never skipped: the tier needs the server, and says how to get it.
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	db, err := sql.Open("mysql", srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	const table = "orders_idem"
	if err := mysqlstore.CreateTable(t.Context(), db, table); err != nil {
		t.Fatal(err)
	}
	where := "MySQL table " + table + " on root@tcp(" + srv.Addr + ")/sqsonce"
	recordCommands(t, mysqlstore.New(db, table), where, "--store", "mysql", "--database-url", srv.DSN, "--table", table)

	r := run(t, runOpts{cfg: &aws.Config{}}, "inspect", "--store", "mysql", "--database-url", srv.DSN, "--table", "no_such_table", "--key-prefix", "p", "k")
	if r.code != ops.ExitError || !strings.Contains(r.stderr, "store call failed") || !strings.Contains(r.stderr, "no_such_table") {
		t.Errorf("inspect on a missing MySQL table: exit %d, stderr %q; want exit %d naming the table", r.code, r.stderr, ops.ExitError)
	}

	// A user who may only read: inspect works, release is refused by the
	// server, and neither says the password.
	readerDSN, err := srv.CreateUser(t.Context(), "reader", "SELECT ON sqsonce.*")
	if err != nil {
		t.Fatal(err)
	}
	password := readerDSN[strings.Index(readerDSN, ":")+1 : strings.Index(readerDSN, "@")]
	cli := func(args ...string) result {
		t.Helper()
		all := append([]string{args[0], "--store", "mysql", "--database-url", readerDSN, "--table", table, "--key-prefix", "p"}, args[1:]...)
		return run(t, runOpts{cfg: &aws.Config{}}, all...)
	}
	lease, err := mysqlstore.New(db, table).Acquire(t.Context(), store.AcquireRequest{ID: store.RecordID("p", "k"), Owner: "o", Now: time.Now(), LockUntil: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if r := cli("inspect", "k"); r.code != ops.ExitOK || !strings.Contains(r.stdout, lease.Owner) {
		t.Errorf("inspect as a reader: exit %d, stdout %q, stderr %q; want the record", r.code, r.stdout, r.stderr)
	}
	r = cli("release", "--force", "k")
	if r.code != ops.ExitError || !strings.Contains(r.stderr, "store call failed") || !strings.Contains(r.stderr, "UPDATE command denied") {
		t.Errorf("release as a reader: exit %d, stderr %q; want exit %d, the server's refusal", r.code, r.stderr, ops.ExitError)
	}
	for _, r := range []result{r, cli("status", "--locks"), cli("inspect", "k")} {
		if strings.Contains(r.stdout+r.stderr, password) {
			t.Errorf("the DSN's password is printed:\n%s\n%s", r.stdout, r.stderr)
		}
	}
	if !strings.Contains(cli("status", "--locks").stdout, "reader@tcp("+srv.Addr+")/sqsonce") {
		t.Errorf("status --locks does not name the store by its user, address and database")
	}
}

// TestRecordCommandsStoreDown: a Redis store that does not answer is the
// store's error (exit 1), never a key not found.
func TestRecordCommandsStoreDown(t *testing.T) {
	t.Parallel()
	srv := redisserver.Start(t)
	addr := srv.Addr
	srv.Stop()
	r := run(t, runOpts{cfg: &aws.Config{}}, "inspect", "--store", "redis", "--redis-url", "redis://"+addr+"?max_retries=-1", "--key-prefix", "p", "k")
	if r.code != ops.ExitError || !strings.Contains(r.stderr, "store call failed") {
		t.Errorf("inspect on a stopped Redis: exit %d, stderr %q; want exit %d, a store call failed", r.code, r.stderr, ops.ExitError)
	}
}

// recordCommands runs each record command on the store s, which the flags
// storeFlags name (status --locks says it scanned where), and checks what it did through s.
func recordCommands(t *testing.T, s ops.RecordStore, where string, storeFlags ...string) {
	t.Helper()
	ctx := context.Background()
	clock := testclock.New(time.Now().Truncate(time.Second))
	const prefix = "orders-processor"
	held, done, missing := "order-held", "order-done", "order-missing"
	acquireAt := func(key string, lock time.Duration) store.Lease {
		t.Helper()
		lease, err := s.Acquire(ctx, store.AcquireRequest{ID: store.RecordID(prefix, key), Owner: "owner-" + key, Now: clock.Now(), LockUntil: clock.Now().Add(lock)})
		if err != nil {
			t.Fatalf("acquire %s: %v", key, err)
		}
		return lease
	}
	lease := acquireAt(held, 5*time.Minute)
	if err := s.Complete(ctx, acquireAt(done, time.Minute), store.Completion{Until: clock.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// No AWS configuration at all, not even a region: none is needed.
	cli := func(stdin string, args ...string) result {
		t.Helper()
		all := append(append([]string{args[0]}, storeFlags...), "--key-prefix", prefix)
		return run(t, runOpts{stdin: stdin, now: clock.Now, cfg: &aws.Config{}}, append(all, args[1:]...)...)
	}
	status := func(key string) store.Status {
		t.Helper()
		rec, err := s.Read(ctx, store.RecordID(prefix, key))
		if err != nil {
			t.Fatalf("read %s: %v", key, err)
		}
		return rec.Status
	}

	r := cli("", "inspect", held)
	for _, want := range []string{
		"record id " + prefix + "#" + held,
		"PROCESSING: a processor holds the lock",
		"owner " + lease.Owner,
		fmt.Sprintf("fence %d", lease.Fence),
		"live, expires " + lease.LockExpiresAt.UTC().Format(time.RFC3339) + " (in 5m0s)",
	} {
		if r.code != ops.ExitOK || !strings.Contains(words(r.stdout), words(want)) {
			t.Errorf("inspect %s: exit %d, says\n%s\nwithout %q", held, r.code, r.stdout, want)
		}
	}
	if r := cli("", "inspect", done); r.code != ops.ExitOK || !strings.Contains(r.stdout, "COMPLETED") {
		t.Errorf("inspect %s: exit %d, says\n%s\nnot COMPLETED", done, r.code, r.stdout)
	}
	if r := cli("", "inspect", missing); r.code != ops.ExitNotFound || !strings.Contains(r.stderr, where) || strings.Contains(r.stderr, "region") {
		t.Errorf("inspect %s (no record): exit %d, stderr %q; want %d, naming %s and no AWS region", missing, r.code, r.stderr, ops.ExitNotFound, where)
	}

	r = cli("", "status", "--locks")
	if r.code != ops.ExitOK || !strings.Contains(r.stdout, held) || strings.Contains(r.stdout, done) || !strings.Contains(r.stdout, "1 PROCESSING record under "+prefix+"# in "+where) {
		t.Errorf("status --locks: exit %d, says\n%s\nwant %s listed and %s not, in %s", r.code, r.stdout, held, done, where)
	}
	if strings.Contains(r.stdout, "queue ") || strings.Contains(r.stdout, "in flight") {
		t.Errorf("status --locks with no queue prints a queue table's header:\n%s", r.stdout)
	}
	// A PostgreSQL store's --table is no DynamoDB table to check.
	if strings.Contains(r.stdout, "DescribeTable") {
		t.Errorf("status --locks checks the store's table as a DynamoDB table:\n%s", r.stdout)
	}

	// Two completions with messages pending: one written ten minutes
	// ago, as its window's end tells with a window of an hour, and one
	// just now. The completion and the lock above have none.
	outbox := []byte(`[{"To":"sqs:https://sqs.us-east-1.amazonaws.com/123456789012/next","Body":"accepted"}]`)
	stale, fresh := "order-stale", "order-fresh"
	if err := s.Complete(ctx, acquireAt(stale, time.Minute), store.Completion{Until: clock.Now().Add(50 * time.Minute), Outbox: outbox}); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, acquireAt(fresh, time.Minute), store.Completion{Until: clock.Now().Add(time.Hour), Outbox: outbox}); err != nil {
		t.Fatal(err)
	}
	// Another processor's completion with messages pending, and its lock,
	// in the same store: never counted or listed under this prefix.
	for _, other := range []string{"other-processor", prefix + "-2"} {
		lease, err := s.Acquire(ctx, store.AcquireRequest{ID: store.RecordID(other, stale), Owner: "owner-other", Now: clock.Now(), LockUntil: clock.Now().Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, lease, store.Completion{Until: clock.Now().Add(50 * time.Minute), Outbox: outbox}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Acquire(ctx, store.AcquireRequest{ID: store.RecordID(other, held), Owner: "owner-other", Now: clock.Now(), LockUntil: clock.Now().Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	if r := cli("", "status", "--locks"); r.code != ops.ExitOK || !strings.Contains(r.stdout, "1 PROCESSING record under "+prefix+"# in "+where) {
		t.Errorf("status --locks with another prefix's lock in the store: exit %d, says\n%s\nwant 1 record", r.code, r.stdout)
	}
	r = cli("", "status", "--pending", "--dedupe-window", "1h")
	for _, want := range []string{
		"1 key with emitted messages pending for 5m0s or more under " + prefix + "# in " + where,
		"(2 pending in all;",
		"(--dedupe-window); 1 key completed less than 5m0s ago",
		stale + " " + clock.Now().Add(-10*time.Minute).UTC().Format(time.RFC3339) + " (10m0s ago)",
		"next: sqs-once inspect KEY",
	} {
		if r.code != ops.ExitOK || !strings.Contains(words(r.stdout), words(want)) {
			t.Errorf("status --pending: exit %d, says\n%s\nwithout %q", r.code, r.stdout, want)
		}
	}
	if strings.Contains(r.stdout, fresh+" ") || strings.Contains(r.stdout, done+" ") {
		t.Errorf("status --pending lists a key pending for less than 5m, or one with nothing pending:\n%s", r.stdout)
	}
	// Without the window, no key's age is known: every key pending is
	// counted, and the output says so.
	r = cli("", "status", "--pending")
	for _, want := range []string{
		"2 keys with emitted messages pending under " + prefix + "# in " + where,
		"for how long is unknown: the dedupe window is",
		stale, fresh,
	} {
		if r.code != ops.ExitOK || !strings.Contains(words(r.stdout), words(want)) {
			t.Errorf("status --pending without a window: exit %d, says\n%s\nwithout %q", r.code, r.stdout, want)
		}
	}
	if err := s.MarkSent(ctx, mustRead(t, s, store.RecordID(prefix, stale))); err != nil {
		t.Fatal(err)
	}
	if r := cli("", "status", "--pending"); r.code != ops.ExitOK || !strings.Contains(r.stdout, "1 key with emitted messages pending") || strings.Contains(r.stdout, stale) {
		t.Errorf("status --pending after %s's messages were marked sent: exit %d, says\n%s", stale, r.code, r.stdout)
	}

	if r := cli("", "release", held); r.code != ops.ExitRefused || status(held) != store.StatusProcessing {
		t.Errorf("release of a live lock without --force: exit %d, record %s; want exit %d and the lock kept", r.code, status(held), ops.ExitRefused)
	}
	if r := cli("", "release", "--force", held); r.code != ops.ExitOK || status(held) != store.StatusReleased {
		t.Errorf("release --force: exit %d, record %s; want exit 0 and RELEASED", r.code, status(held))
	}
	if r := cli("", "status", "--locks"); r.code != ops.ExitOK || strings.Contains(r.stdout, held) {
		t.Errorf("status --locks after the release: exit %d, still lists %s:\n%s", r.code, held, r.stdout)
	}

	if r := cli("", "forget", held); r.code != ops.ExitRefused {
		t.Errorf("forget of a released key: exit %d, want %d", r.code, ops.ExitRefused)
	}
	if r := cli("n\n", "forget", done); r.code != ops.ExitRefused || status(done) != store.StatusCompleted {
		t.Errorf("forget answered no: exit %d, record %s; want exit %d and the record kept", r.code, status(done), ops.ExitRefused)
	}
	if r := cli("", "forget", "--yes", done); r.code != ops.ExitOK {
		t.Errorf("forget --yes: exit %d, want 0", r.code)
	}
	if _, err := s.Read(ctx, store.RecordID(prefix, done)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after forget, reading %s = %v; want not found", done, err)
	}
}

// mustRead is id's record in s.
func mustRead(t *testing.T, s store.Store, id string) store.Record {
	t.Helper()
	rec, err := s.Read(context.Background(), id)
	if err != nil {
		t.Fatalf("read %s: %v", id, err)
	}
	return rec
}
