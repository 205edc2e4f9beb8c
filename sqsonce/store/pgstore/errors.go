package pgstore

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// fail is a failed statement as the store's error: a *store.StoreError
// matching store.ErrMisconfigured for what no retry fixes (the table or a
// column missing, access denied, a database or role that does not exist),
// store.ErrUnavailable otherwise (a connection refused or dropped, a
// timeout, a server shutting down), unwrapping to pgx's error.
func (s *Store) fail(op, id string, err error) error {
	return &store.StoreError{Op: op, ID: id, Err: s.sort(err)}
}

// sort wraps a *pgconn.PgError that no retry fixes with
// store.ErrMisconfigured and what to do about it; any other error is
// returned as it is (a retry may fix it).
func (s *Store) sort(err error) error {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || !misconfigured(pg.Code) {
		return err
	}
	fix := ""
	switch pg.Code {
	case "42P01": // undefined_table
		fix = fmt.Sprintf("; the table %s does not exist: create it with pgstore.CreateTable or this SQL:\n%s", s.t, TableDDL(s.name))
	case "42703", "42804": // undefined_column, datatype_mismatch
		// The likeliest: a table an earlier version created, without the
		// outbox column, met by this version before its CreateTable ran.
		fix = fmt.Sprintf("; the table %s is not the store's (Check says how; a table created by an earlier version lacks the outbox column: %s): the store's is\n%s", s.t, addOutbox(s.t), TableDDL(s.name))
	case "42501": // insufficient_privilege
		fix = fmt.Sprintf("; grant SELECT, INSERT, UPDATE, DELETE on %s to the store's role", s.t)
	}
	return fmt.Errorf("%w: %w%s", store.ErrMisconfigured, err, fix)
}

// misconfigured reports whether a SQLSTATE is one no retry fixes: class
// 42 (a missing table or column, a type that does not match, no
// privilege), 3D000 (no such database), 3F000 (no such schema) and class
// 28 (the role cannot log in).
func misconfigured(code string) bool {
	if len(code) != 5 {
		return false
	}
	switch code[:2] {
	case "42", "28":
		return true
	}
	return code == "3D000" || code == "3F000"
}
