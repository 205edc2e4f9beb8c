package layout

import (
	"strings"
	"testing"
)

// redisClient is the Redis client's module: only sqsonce/store/redisstore may
// bring it in.
const redisClient = "github.com/redis/go-redis"

// TestOnlyTheRedisStoreLinksTheRedisClient: the binaries (cmd/..., as built
// for the host and as the Makefile builds the functions for Lambda),
// package sqsonce and sqsoncetest bring in no package of the Redis client:
// a program that uses only the DynamoDB store does not link it (it adds
// 2.3 MiB to the processor's bootstrap). sqsonce/store/redisstore does, which
// shows the check looks where the client is.
func TestOnlyTheRedisStoreLinksTheRedisClient(t *testing.T) {
	t.Parallel()
	onlyStoreLinks(t, "./sqsonce/store/redisstore", redisClient+"/v9",
		func(pkg string) bool { return under(pkg, redisClient+"/v9") || strings.HasPrefix(pkg, redisClient+"/") },
		"the Redis client")
}

// onlyStoreLinks checks that storePkg links client (which shows the check
// looks where the client is), and that no binary under cmd/ (as built for
// the host and as the Makefile builds the functions for Lambda), nor
// sqsonce, sqsoncetest or the targets, links a package banned says is the
// client's.
func onlyStoreLinks(t *testing.T, storePkg, client string, banned func(string) bool, what string) {
	t.Helper()
	store := listDeps(t, nil, "", storePkg)
	if _, ok := store[client]; !ok {
		t.Fatalf("go list -deps %s does not list %s: the check below would prove nothing", storePkg, client)
	}
	roots := []string{module + "/sqsonce", module + "/sqsonce/sqsoncetest", module + "/sqsonce/targets"}
	for _, build := range []struct {
		env  []string
		tags string
	}{
		{nil, ""},
		{[]string{"GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0"}, "lambda.norpc"}, // the Makefile's LAMBDA_BUILD
	} {
		g := listDeps(t, build.env, build.tags, "./cmd/...", "./sqsonce", "./sqsonce/sqsoncetest", "./sqsonce/targets")
		var all []string
		for pkg := range g {
			if strings.HasPrefix(pkg, module+"/cmd/") {
				all = append(all, pkg)
			}
		}
		if len(all) == 0 {
			t.Fatal("go list listed no command under cmd/")
		}
		checkNone(t, g, append(all, roots...), banned,
			"a binary or package that does not use its store links "+what+" "+strings.Join(append(build.env, build.tags), " "))
	}
}
