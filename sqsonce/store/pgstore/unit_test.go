package pgstore

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// TestErrorClasses: what no retry fixes matches ErrMisconfigured alone,
// with the fix; the rest ErrUnavailable alone; both unwrap to pgx's error.
func TestErrorClasses(t *testing.T) {
	s := New(nil, "app.records")
	for _, code := range []string{"42P01", "42703", "42501", "28P01", "3D000", "3F000"} {
		pg := &pgconn.PgError{Code: code, Message: "m"}
		err := s.fail("acquire", "p#k", pg)
		var got *pgconn.PgError
		if !errors.Is(err, store.ErrMisconfigured) || errors.Is(err, store.ErrUnavailable) || !errors.As(err, &got) || got.Code != code {
			t.Errorf("%s: %v; want ErrMisconfigured alone, unwrapping to the PgError", code, err)
		}
	}
	if err := s.fail("acquire", "p#k", &pgconn.PgError{Code: "42P01"}); !strings.Contains(err.Error(), `CREATE TABLE IF NOT EXISTS "app"."records"`) {
		t.Errorf("a missing table's error lacks the DDL: %v", err)
	}
	// A missing column is likeliest the outbox of a table an earlier
	// version created: the error says how to add it.
	if err := s.fail("acquire", "p#k", &pgconn.PgError{Code: "42703", Message: `column c.outbox does not exist`}); !strings.Contains(err.Error(), `ALTER TABLE "app"."records" ADD COLUMN IF NOT EXISTS outbox bytea`) {
		t.Errorf("a missing column's error lacks the outbox's ALTER TABLE: %v", err)
	}
	for _, cause := range []error{&pgconn.PgError{Code: "57P01"}, &pgconn.PgError{Code: "40001"}, context.DeadlineExceeded, errors.New("dial tcp: connection refused")} {
		err := s.fail("acquire", "p#k", cause)
		if errors.Is(err, store.ErrMisconfigured) || !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, cause) {
			t.Errorf("%v: %v; want ErrUnavailable alone, unwrapping to the cause", cause, err)
		}
	}
}

// TestTableDDLQuotes: the table name is quoted, a schema kept apart, and a
// name that is not an identifier cannot break out of it; the table has
// the outbox column, and the DDL adds it to a table that lacks it.
func TestTableDDLQuotes(t *testing.T) {
	ddl := TableDDL(`x"; DROP TABLE y; --`)
	if !strings.Contains(ddl, `CREATE TABLE IF NOT EXISTS "x""; DROP TABLE y; --" (`) {
		t.Errorf("TableDDL of a hostile name:\n%s", ddl)
	}
	if ddl := TableDDL("app.records"); !strings.Contains(ddl, `"app"."records"`) || !strings.Contains(ddl, `CREATE INDEX IF NOT EXISTS "records_expires_at" ON "app"."records" (expires_at)`) ||
		!strings.Contains(ddl, "\n  outbox          bytea ") || !strings.Contains(ddl, "\nALTER TABLE \"app\".\"records\" ADD COLUMN IF NOT EXISTS outbox bytea;\n") {
		t.Errorf("TableDDL of a schema-qualified name:\n%s", ddl)
	}
}

// TestTxWithoutSqsonce: a context without a transaction of this package's
// is ErrNoTx, and a transaction begun stays Empty, holding nothing, until
// the work asks for it.
func TestTxWithoutSqsonce(t *testing.T) {
	if _, err := Tx(context.Background()); !errors.Is(err, ErrNoTx) {
		t.Errorf("Tx(background) = %v; want ErrNoTx", err)
	}
	tx := New(nil, "t").Begin(store.Lease{ID: "p#k", Owner: "o", Fence: 2})
	if !tx.Empty() {
		t.Error("Begin's transaction is not Empty")
	}
	if err := tx.Rollback(context.Background()); err != nil {
		t.Errorf("Rollback of a transaction never begun: %v", err)
	}
}
