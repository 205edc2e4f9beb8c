package pgstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// columns are the store's columns and their types, as format_type names
// them.
var columns = []struct{ name, typ string }{
	{"id", "text"}, {"status", "text"}, {"owner", "text"}, {"fence", "bigint"},
	{"lock_expires_at", "bigint"}, {"expires_at", "bigint"}, {"payload_hash", "text"}, {"result", "bytea"},
	{"outbox", "bytea"},
}

// Check implements store.Checker: it reads the catalog once and verifies
// that the table exists, has the store's columns with their types, its
// primary key is (id) alone, no other column refuses a row the store
// writes (NOT NULL without a default), and the role may select, insert,
// update and delete in it. A missing or different table matches
// store.ErrMisconfigured and gives the SQL that creates the right one; a
// table an earlier version created, without the outbox column, gives the
// ALTER TABLE that adds it (or CreateTable does); a database that does not
// answer matches store.ErrUnavailable.
func (s *Store) Check(ctx context.Context) error {
	var oid *uint32
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass($1)::oid`, s.t).Scan(&oid); err != nil {
		return s.fail("check", s.name, err)
	}
	if oid == nil {
		return s.errNoTable()
	}
	rows, err := s.pool.Query(ctx, `SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull AND NOT a.atthasdef,
  COALESCE(a.attnum = ANY(i.indkey::int2[]), false), COALESCE(array_length(i.indkey::int2[], 1), 0)
FROM pg_attribute a LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary
WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped`, *oid)
	if err != nil {
		return s.fail("check", s.name, err)
	}
	type col struct {
		typ          string
		required, pk bool
	}
	have := map[string]col{}
	pkLen := 0
	for rows.Next() {
		var name string
		var c col
		if err := rows.Scan(&name, &c.typ, &c.required, &c.pk, &pkLen); err != nil {
			rows.Close()
			return s.fail("check", s.name, err)
		}
		have[name] = c
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return s.fail("check", s.name, err)
	}
	var problems []string
	for _, want := range columns {
		c, ok := have[want.name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("no column %s (%s)", want.name, want.typ))
		case c.typ != want.typ:
			problems = append(problems, fmt.Sprintf("column %s is %s, not %s", want.name, c.typ, want.typ))
		}
	}
	if c, ok := have["id"]; ok && (!c.pk || pkLen != 1) {
		problems = append(problems, "the primary key is not (id)")
	}
	var extra []string
	for name, c := range have {
		if c.required && !slices.ContainsFunc(columns, func(w struct{ name, typ string }) bool { return w.name == name }) {
			extra = append(extra, name)
		}
	}
	slices.Sort(extra)
	for _, name := range extra {
		problems = append(problems, fmt.Sprintf("column %s is NOT NULL without a default (the store does not write it)", name))
	}
	_, hasOutbox := have["outbox"]
	switch {
	case len(problems) == 1 && !hasOutbox:
		// The table of an earlier version, right but for the column this
		// one added: the fix is one ALTER TABLE, not the whole DDL.
		return s.errNoOutbox()
	case len(problems) > 0:
		return fmt.Errorf("pgstore: %w: the table %s is not the store's: %s; the store's table is:\n%s", store.ErrMisconfigured, s.t, strings.Join(problems, "; "), TableDDL(s.name))
	}
	var sel, ins, upd, del bool
	if err := s.pool.QueryRow(ctx, `SELECT has_table_privilege($1::oid, 'SELECT'), has_table_privilege($1::oid, 'INSERT'), has_table_privilege($1::oid, 'UPDATE'), has_table_privilege($1::oid, 'DELETE')`, *oid).Scan(&sel, &ins, &upd, &del); err != nil {
		return s.fail("check", s.name, err)
	}
	if !sel || !ins || !upd || !del {
		return fmt.Errorf("pgstore: %w: the role may not select, insert, update and delete in %s (select %v, insert %v, update %v, delete %v): GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO current_user", store.ErrMisconfigured, s.t, sel, ins, upd, del, s.t)
	}
	return nil
}
