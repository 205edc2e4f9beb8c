//go:build integration

package mysqlstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/mysqlstore"
)

// keyPairs are keys that MySQL's collations take for one another: they
// differ only in case (every _ci collation, the defaults) or only in
// trailing spaces (every PAD SPACE collation, utf8mb4_bin included).
var keyPairs = [][2]string{{"Order-1", "order-1"}, {"k", "k "}}

// keyProblems acquires each key of keyPairs on s under an owner of its
// own and says where two of them turned out to be one record.
func keyProblems(ctx context.Context, s *mysqlstore.Store, tag string) []string {
	now := time.Now()
	var problems []string
	for _, pair := range keyPairs {
		for i, key := range pair {
			id := store.RecordID("keys-"+tag, key)
			if _, err := s.Acquire(ctx, store.AcquireRequest{ID: id, Owner: fmt.Sprintf("owner-%d", i), Now: now, LockUntil: now.Add(time.Minute)}); err != nil {
				problems = append(problems, fmt.Sprintf("the Acquire of %q after %q's: %v", id, store.RecordID("keys-"+tag, pair[0]), err))
				continue
			}
			rec, err := s.Read(ctx, id)
			if err != nil || rec.Owner != fmt.Sprintf("owner-%d", i) || rec.ID != id {
				problems = append(problems, fmt.Sprintf("Read(%q) = %s, %v; want owner-%d's lock", id, rec, err, i))
			}
		}
	}
	return problems
}

// TestKeysByteForByte: keys that differ only in case or only in trailing
// spaces are distinct records, as on the other stores; on a table whose id
// is VARCHAR under the server's default collation, or utf8mb4_bin, the
// same test finds them one record (so the test can fail, and Check
// refuses those tables).
func TestKeysByteForByte(t *testing.T) {
	db := newDB(t, plainParams)
	s := newTable(t, db, "byte_keys")
	if problems := keyProblems(t.Context(), s, "varbinary"); len(problems) > 0 {
		t.Errorf("on the store's table, keys that differ only in case or trailing spaces are not distinct records: %q", problems)
	}
	for _, mutant := range []struct{ name, column string }{
		{"keys_default", "VARCHAR(512) CHARACTER SET utf8mb4 NOT NULL"},
		{"keys_bin", "VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL"},
	} {
		m := newTable(t, db, mutant.name)
		if _, err := db.ExecContext(t.Context(), "ALTER TABLE "+mutant.name+" MODIFY id "+mutant.column); err != nil {
			t.Fatal(err)
		}
		if problems := keyProblems(t.Context(), m, mutant.name); len(problems) == 0 {
			t.Errorf("with id %s the keys came out distinct: the test cannot tell a collated key column from a binary one", mutant.column)
		} else {
			t.Logf("with id %s: %q", mutant.column, problems)
		}
		if err := m.Check(t.Context()); err == nil {
			t.Errorf("Check of a table with id %s passed; want it refused", mutant.column)
		}
	}
}
