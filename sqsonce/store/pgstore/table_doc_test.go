package pgstore_test

import (
	"strings"
	"testing"

	"github.com/sqs-once/sqs-once/internal/docs"
	"github.com/sqs-once/sqs-once/sqsonce/store/pgstore"
)

// pgDoc is the page whose table SQL a reader copies.
const pgDoc = "docs/postgres.md"

// docDDL is the page's CREATE TABLE block.
func docDDL(t testing.TB) string {
	t.Helper()
	return docs.CodeBlock(t, pgDoc, "sql", "CREATE TABLE IF NOT EXISTS sqs_once_records")
}

// TestTableDocIsTableDDL: the page's SQL is TableDDL's for its table
// name, but for the quotes a plain name does not need, so what a reader
// copies is what CreateTable runs (and the integration tier runs the
// page's SQL itself).
func TestTableDocIsTableDDL(t *testing.T) {
	t.Parallel()
	want := strings.NewReplacer(`"sqs_once_records"`, "sqs_once_records", `"sqs_once_records_expires_at"`, "sqs_once_records_expires_at").
		Replace(pgstore.TableDDL("sqs_once_records"))
	if got := docDDL(t); got != want {
		t.Errorf("%s's SQL:\n%s\nTableDDL(\"sqs_once_records\"), unquoted:\n%s", pgDoc, got, want)
	}
}
