package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// columns are the store's columns: their DATA_TYPE in information_schema,
// and the least length of a VARBINARY.
var columns = []struct {
	name, typ string
	length    int64
}{
	{"id", "varbinary", MaxIDBytes}, {"status", "varbinary", 16}, {"owner", "varbinary", 2048}, {"fence", "bigint", 0},
	{"lock_expires_at", "bigint", 0}, {"expires_at", "bigint", 0}, {"payload_hash", "varbinary", 2048},
	{"result", "mediumblob", 0}, {"outbox", "mediumblob", 0}, {"version", "bigint", 0},
}

// Check implements store.Checker: it reads information_schema and
// verifies that the table exists, is InnoDB (the transactions the store
// relies on: MyISAM has none), has the store's columns with their types
// (the key VARBINARY, compared byte for byte), its primary key is (id)
// alone, and no other column refuses a row the store writes (NOT NULL
// without a default); then it runs a statement of each kind the store
// runs, matching no row, to verify that the user may select, insert,
// update and delete in it. A missing or different table matches
// store.ErrMisconfigured and says the SQL that fixes it; a database that
// does not answer matches store.ErrUnavailable.
func (s *Store) Check(ctx context.Context) error {
	schema, table := "DATABASE()", s.name
	var args []any
	if db, tb, ok := strings.Cut(s.name, "."); ok {
		schema, table = "?", tb
		args = append(args, db)
	}
	args = append(args, table)
	var engine sql.NullString
	err := s.db.QueryRowContext(ctx, `SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = `+schema+` AND TABLE_NAME = ?`, args...).Scan(&engine)
	if errors.Is(err, sql.ErrNoRows) {
		return s.errNoTable()
	}
	if err != nil {
		return s.fail("check", s.name, err)
	}
	if !strings.EqualFold(engine.String, "InnoDB") {
		return fmt.Errorf("mysqlstore: %w: the table %s is %s, not InnoDB: the store's transactions (a work's writes committed with its completion) need InnoDB's; run ALTER TABLE %s ENGINE = InnoDB", store.ErrMisconfigured, s.t, engine.String, s.t)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, COALESCE(CHARACTER_MAXIMUM_LENGTH, 0), COALESCE(COLLATION_NAME, ''),
  IS_NULLABLE = 'NO' AND COLUMN_DEFAULT IS NULL AND EXTRA NOT LIKE '%auto_increment%' AND EXTRA NOT LIKE '%GENERATED%'
FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = `+schema+` AND TABLE_NAME = ?`, args...)
	if err != nil {
		return s.fail("check", s.name, err)
	}
	type col struct {
		typ, full, collation string
		length               int64
		required             bool
	}
	have := map[string]col{}
	for rows.Next() {
		var name string
		var c col
		if err := rows.Scan(&name, &c.typ, &c.full, &c.length, &c.collation, &c.required); err != nil {
			rows.Close()
			return s.fail("check", s.name, err)
		}
		have[strings.ToLower(name)] = c
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return s.fail("check", s.name, err)
	}
	var problems []string
	for _, want := range columns {
		c, ok := have[want.name]
		wantType := want.typ
		if want.length > 0 {
			wantType = fmt.Sprintf("%s(%d)", want.typ, want.length)
		}
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("no column %s (%s)", want.name, wantType))
		case want.name == "id" && c.typ != want.typ:
			problems = append(problems, fmt.Sprintf("column id is %s %s, not %s: keys are compared byte for byte, and under a collation keys that differ only in case or trailing spaces would be one record (ALTER TABLE %s MODIFY id VARBINARY(%d) NOT NULL)", c.full, c.collation, wantType, s.t, MaxIDBytes))
		case c.typ != want.typ || c.length < want.length:
			problems = append(problems, fmt.Sprintf("column %s is %s, not %s", want.name, c.full, wantType))
		}
	}
	var pk []string
	krows, err := s.db.QueryContext(ctx, `SELECT LOWER(COLUMN_NAME) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = `+schema+` AND TABLE_NAME = ? AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX`, args...)
	if err != nil {
		return s.fail("check", s.name, err)
	}
	for krows.Next() {
		var name string
		if err := krows.Scan(&name); err != nil {
			krows.Close()
			return s.fail("check", s.name, err)
		}
		pk = append(pk, name)
	}
	krows.Close()
	if err := krows.Err(); err != nil {
		return s.fail("check", s.name, err)
	}
	if !slices.Equal(pk, []string{"id"}) {
		problems = append(problems, fmt.Sprintf("the primary key is (%s), not (id)", strings.Join(pk, ", ")))
	}
	var extra []string
	for name, c := range have {
		if c.required && !slices.ContainsFunc(columns, func(w struct {
			name, typ string
			length    int64
		}) bool {
			return w.name == name
		}) {
			extra = append(extra, name)
		}
	}
	slices.Sort(extra)
	for _, name := range extra {
		problems = append(problems, fmt.Sprintf("column %s is NOT NULL without a default (the store does not write it)", name))
	}
	if len(problems) > 0 {
		return fmt.Errorf("mysqlstore: %w: the table %s is not the store's: %s; the store's table is:\n%s", store.ErrMisconfigured, s.t, strings.Join(problems, "; "), TableDDL(s.name))
	}
	return s.checkPrivileges(ctx)
}

// checkPrivileges runs a statement of each kind the store runs on the
// table, each matching no row (an impossible WHERE reads none and locks
// none): the server checks the privilege all the same. It is what the
// grants mean, roles and wildcards included, where reading SHOW GRANTS
// would have to interpret them.
func (s *Store) checkPrivileges(ctx context.Context) error {
	probes := []struct{ priv, q string }{
		{"SELECT", `SELECT id FROM ` + s.t + ` WHERE FALSE`},
		{"INSERT", `INSERT INTO ` + s.t + ` (id, status, owner, fence, expires_at) SELECT 'x', 'x', 'x', 0, 0 FROM DUAL WHERE FALSE`},
		{"UPDATE", `UPDATE ` + s.t + ` SET version = version + 1 WHERE FALSE`},
		{"DELETE", `DELETE FROM ` + s.t + ` WHERE FALSE`},
	}
	var denied []string
	for _, p := range probes {
		_, err := s.db.ExecContext(ctx, p.q)
		switch n := code(err); {
		case err == nil:
		case n == errTableAccessDenied || n == errColumnAccessDenied:
			denied = append(denied, p.priv)
		default:
			return s.fail("check", s.name, err)
		}
	}
	if len(denied) > 0 {
		return fmt.Errorf("mysqlstore: %w: the user may not %s in %s: GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO the store's user", store.ErrMisconfigured, strings.ToLower(strings.Join(denied, ", ")), s.t, s.t)
	}
	return nil
}
