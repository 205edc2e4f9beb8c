package layout

import (
	"strings"
	"testing"
)

// storeSDKs are the module paths of the clients of a store or of a target:
// DynamoDB's (the service and its streams, whose error types the store
// sorts), Redis's, PostgreSQL's, and the Lambda, SNS and EventBridge
// clients.
var storeSDKs = []string{
	"github.com/aws/aws-sdk-go-v2/service/dynamodb",
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams",
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb",
	"github.com/redis/go-redis",
	"github.com/valkey-io",
	"github.com/jackc/pgx",
	"github.com/lib/pq",
	"github.com/aws/aws-sdk-go-v2/service/lambda",
	"github.com/aws/aws-sdk-go-v2/service/sns",
	"github.com/aws/aws-sdk-go-v2/service/eventbridge",
}

// isStoreSDK reports whether pkg belongs to one of storeSDKs.
func isStoreSDK(pkg string) bool {
	for _, m := range storeSDKs {
		if under(pkg, m) || strings.HasPrefix(pkg, m+"/") {
			return true
		}
	}
	return false
}

// TestStoreSDKsListed: the check below looks where the clients are: the
// DynamoDB store links DynamoDB's, the Redis store Redis's, the PostgreSQL
// store pgx.
func TestStoreSDKsListed(t *testing.T) {
	t.Parallel()
	g := listDeps(t, nil, "", "./sqsonce/store/dynamostore", "./sqsonce/store/redisstore", "./sqsonce/store/pgstore")
	for _, pkg := range []string{"github.com/aws/aws-sdk-go-v2/service/dynamodb", "github.com/redis/go-redis/v9", "github.com/jackc/pgx/v5"} {
		if _, ok := g[pkg]; !ok || !isStoreSDK(pkg) {
			t.Fatalf("go list -deps of the stores does not list %s as a store's client: the checks below would prove nothing", pkg)
		}
	}
}

// TestSqsonceLinksNoStoreSDK: the root package sqsonce, the lock and the
// SQS processor, imports no store's client and no target's: a store is a
// package of its own (sqsonce/store/...), which a program imports to use
// it. So does the store contract, sqsonce/store, which imports the
// standard library alone.
func TestSqsonceLinksNoStoreSDK(t *testing.T) {
	t.Parallel()
	for _, build := range []struct {
		env  []string
		tags string
	}{
		{nil, ""},
		{[]string{"GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0"}, "lambda.norpc"}, // the Makefile's LAMBDA_BUILD
	} {
		root := module + "/sqsonce"
		g := listDeps(t, build.env, build.tags, "./sqsonce")
		if _, ok := g[root]; !ok {
			t.Fatalf("go list did not list %s", root)
		}
		checkNone(t, g, []string{root}, isStoreSDK, "sqsonce links a store's or a target's client "+strings.Join(append(build.env, build.tags), " "))
	}
	root := module + "/sqsonce/store"
	g := listDeps(t, nil, "", "./sqsonce/store")
	if _, ok := g[root]; !ok {
		t.Fatalf("go list did not list %s", root)
	}
	// A standard library package's path has no dot in its first element.
	notStd := func(pkg string) bool { return pkg != root && strings.Contains(strings.Split(pkg, "/")[0], ".") }
	checkNone(t, g, []string{root}, notStd, "the store contract imports more than the standard library")
}

// TestMemoryStoreProgramLinksNoStoreSDK: a program that uses only sqsonce
// and the in-memory store (testdata/memonly) links no store's client and
// no target's, as built for the host and for Lambda.
func TestMemoryStoreProgramLinksNoStoreSDK(t *testing.T) {
	t.Parallel()
	const program = "./internal/layout/testdata/memonly"
	root := module + strings.TrimPrefix(program, ".")
	for _, build := range []struct {
		env  []string
		tags string
	}{
		{nil, ""},
		{[]string{"GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0"}, "lambda.norpc"},
	} {
		g := listDeps(t, build.env, build.tags, program)
		if _, ok := g[root]; !ok {
			t.Fatalf("go list did not list %s", root)
		}
		if _, ok := g[module+"/sqsonce/store/memstore"]; !ok {
			t.Fatalf("%s does not link the memory store: the check proves nothing", root)
		}
		checkNone(t, g, []string{root}, isStoreSDK, "a program on sqsonce and the memory store links a store's or a target's client "+strings.Join(append(build.env, build.tags), " "))
	}
}
