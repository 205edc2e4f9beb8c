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
	onlyStoreLinks(t, "./sqsonce/store/pgstore", pgClient+"/v5",
		func(pkg string) bool { return strings.HasPrefix(pkg, pgClient+"/") }, "pgx")
}
