package mysqlstore_test

import (
	"testing"

	"github.com/sqs-once/sqs-once/internal/docs"
	"github.com/sqs-once/sqs-once/sqsonce/store/mysqlstore"
)

// mysqlDoc is the page whose table SQL a reader copies.
const mysqlDoc = "docs/mysql.md"

// docDDL is the page's CREATE TABLE block.
func docDDL(t testing.TB) string {
	t.Helper()
	return docs.CodeBlock(t, mysqlDoc, "sql", "CREATE TABLE IF NOT EXISTS `sqs_once_records`")
}

// TestTableDocIsTableDDL: the page's SQL is TableDDL's for its table
// name, so what a reader copies is what CreateTable runs (and the
// integration tier runs the page's SQL itself).
func TestTableDocIsTableDDL(t *testing.T) {
	t.Parallel()
	if got, want := docDDL(t), mysqlstore.TableDDL("sqs_once_records"); got != want {
		t.Errorf("%s's SQL:\n%s\nTableDDL(\"sqs_once_records\"):\n%s", mysqlDoc, got, want)
	}
}
