package ops_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/internal/ops"
)

// The store is chosen as the processor chooses it: its STORE and
// REDIS_URL, unless flags say otherwise.
func TestResolveReadsTheProcessorsStore(t *testing.T) {
	env := map[string]string{"STORE": "redis", "REDIS_URL": "redis://:secret@cache:6379/2", "REDIS_CLUSTER": "true"}
	calls := 0
	got, err := ops.Resolve(context.Background(), fakeStack{}, fakeFunction{env: env, calls: &calls}, ops.Targets{Stack: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Store != ops.StoreRedis || got.StoreFrom != "processor environment" || got.RedisURL != env["REDIS_URL"] || !got.RedisCluster {
		t.Errorf("Resolve = store %q from %q, url %q, cluster %v; want the processor's", got.Store, got.StoreFrom, got.RedisURL, got.RedisCluster)
	}

	flags := ops.Targets{Stack: "orders", Store: ops.StoreRedis, StoreFrom: "flag", RedisURL: "redis://other:6379", RedisURLFrom: "--redis-url"}
	got, err = ops.Resolve(context.Background(), fakeStack{}, fakeFunction{env: env, calls: &calls}, flags)
	if err != nil {
		t.Fatal(err)
	}
	if got.Store != ops.StoreRedis || got.StoreFrom != "flag" || got.RedisURL != "redis://other:6379" || got.RedisCluster {
		t.Errorf("flags do not win over the processor: %+v", got)
	}

	got, err = ops.Resolve(context.Background(), fakeStack{}, fakeFunction{env: map[string]string{}, calls: &calls}, ops.Targets{Stack: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Store != "" || got.RedisURL != "" {
		t.Errorf("a processor without STORE: store %q, url %q; want none (DynamoDB)", got.Store, got.RedisURL)
	}
}

// A store named without what it needs is a usage error naming the flag or
// the variable, before any call.
func TestStoreFlagsNamed(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"inspect", "--store", "redis", "--key-prefix", "p", "k"}, "--redis-url"},
		{[]string{"inspect", "--store", "redis", "--redis-url", "http://h:1", "--key-prefix", "p", "k"}, "REDIS_URL"},
		{[]string{"inspect", "--store", "postgres", "--key-prefix", "p", "k"}, "--database-url"},
		{[]string{"inspect", "--store", "postgres", "--database-url", "postgres://h/db", "--key-prefix", "p", "k"}, "--table"},
		{[]string{"inspect", "--store", "mysql", "--key-prefix", "p", "k"}, "--database-url"},
		{[]string{"inspect", "--store", "mysql", "--database-url", "u@tcp(h:3306)/db", "--key-prefix", "p", "k"}, "--table"},
		{[]string{"status", "--locks", "--store", "mysql", "--table", "t", "--key-prefix", "p"}, "--database-url"},
		{[]string{"inspect", "--store", "memcached", "--table", "t", "--key-prefix", "p", "k"}, "--store memcached"},
		{[]string{"status", "--locks", "--store", "redis", "--key-prefix", "p"}, "--redis-url"},
	} {
		r := run(t, runOpts{cfg: offline()}, tc.args...)
		if r.code != ops.ExitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("sqs-once %s: exit %d, stderr %q; want exit %d naming %s", strings.Join(tc.args, " "), r.code, r.stderr, ops.ExitUsage, tc.want)
		}
	}
}

// A MySQL DSN the driver refuses is a usage error naming the flag and the
// form, never the DSN, which may hold a password.
func TestMySQLDSNNeverPrinted(t *testing.T) {
	for _, dsn := range []string{
		"ops:s3cr3t@tcp(db:3306",                    // no closing parenthesis, no database
		"ops:s3cr3t@tcp(db:3306)/orders?tls=s3cr3t", // a TLS config never registered
		"mysql://ops:s3cr3t@db:3306/orders",         // a URL, not the driver's form
	} {
		r := run(t, runOpts{cfg: offline()}, "inspect", "--store", "mysql", "--database-url", dsn, "--table", "t", "--key-prefix", "p", "k")
		if r.code != ops.ExitUsage || !strings.Contains(r.stderr, "--database-url") || strings.Contains(r.stderr+r.stdout, "s3cr3t") {
			t.Errorf("--database-url %q: exit %d, stderr %q; want exit %d naming --database-url, without the password", dsn, r.code, r.stderr, ops.ExitUsage)
		}
	}
}
