package layout

import (
	"strings"
	"testing"
)

// pgClient is the PostgreSQL client's module: only sqsonce/store/pgstore
// may bring it in.
const pgClient = "github.com/jackc/pgx"

// TestOnlyThePostgresStoreLinksPgx: the binaries (cmd/..., as built for
// the host and as the Makefile builds the functions for Lambda), package
// sqsonce, sqsoncetest and the targets bring in no package of pgx: a
// program that does not use the PostgreSQL store does not link it.
// sqsonce/store/pgstore does, which shows the check looks where the
// client is.
func TestOnlyThePostgresStoreLinksPgx(t *testing.T) {
	t.Parallel()
	banned := func(pkg string) bool { return strings.HasPrefix(pkg, pgClient+"/") }
	store := listDeps(t, nil, "", "./sqsonce/store/pgstore")
	if _, ok := store[pgClient+"/v5"]; !ok {
		t.Fatalf("go list -deps ./sqsonce/store/pgstore does not list %s/v5: the check below would prove nothing", pgClient)
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
			"a binary or package that does not use the PostgreSQL store links pgx "+strings.Join(append(build.env, build.tags), " "))
	}
}
