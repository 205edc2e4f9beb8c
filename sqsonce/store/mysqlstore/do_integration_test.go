//go:build integration

package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/internal/local/sqlfaults"
	"github.com/sqs-once/sqs-once/sqsonce"
)

// ordersTable creates a business table of the test's: one row per order
// written, no key constraint, so that a duplicate shows as a second row.
func ordersTable(t testing.TB, db *sql.DB, name string) {
	t.Helper()
	if _, err := db.ExecContext(t.Context(), `CREATE TABLE IF NOT EXISTS `+name+` (n BIGINT PRIMARY KEY AUTO_INCREMENT, order_key VARCHAR(255) NOT NULL) ENGINE = InnoDB`); err != nil {
		t.Fatal(err)
	}
}

// insertOrder is the work: an order row for key in the work's
// transaction (Tx), or, plain, on db by itself (autocommit).
func insertOrder(ctx context.Context, db *sql.DB, table, key string, tx bool) error {
	q := `INSERT INTO ` + table + ` (order_key) VALUES (?)`
	if !tx {
		_, err := db.ExecContext(ctx, q, key)
		return err
	}
	stx, err := Tx(ctx)
	if err != nil {
		return err
	}
	_, err = stx.ExecContext(ctx, q, key)
	return err
}

// orders counts the rows of table for key.
func orders(t testing.TB, db *sql.DB, table, key string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM `+table+` WHERE order_key = ?`, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTransactionalHandlerOnce: Do with a handler that writes its order
// through Tx writes it once, and the next delivery is a
// duplicate that runs nothing; a handler that fails leaves no row, and the
// key runs again.
func TestTransactionalHandlerOnce(t *testing.T) {
	db := newDB(t, plainParams)
	s := newTable(t, db, "do_records")
	ordersTable(t, db, "do_orders")
	now := time.Now().Truncate(time.Millisecond)
	p := sqlfaults.Processor(t, s, now)
	key := "once-" + now.String()
	failed := errors.New("the payment was declined")
	if err := p.Do(t.Context(), key, func(ctx context.Context) error {
		if err := insertOrder(ctx, db, "do_orders", key, true); err != nil {
			return err
		}
		return failed
	}); !errors.Is(err, failed) {
		t.Fatalf("a failing handler's Do returned %v; want its error", err)
	}
	if n := orders(t, db, "do_orders", key); n != 0 {
		t.Errorf("%d order rows after a failing handler; want 0 (its transaction rolled back)", n)
	}
	for range 2 {
		if err := p.Do(t.Context(), key, func(ctx context.Context) error { return insertOrder(ctx, db, "do_orders", key, true) }); err != nil {
			t.Fatalf("the handler's Do: %v", err)
		}
		if err := p.Do(t.Context(), key, func(context.Context) error { t.Error("a duplicate ran"); return nil }); !errors.Is(err, sqsonce.ErrDuplicate) {
			t.Errorf("a later delivery returned %v; want ErrDuplicate", err)
		}
		if n := orders(t, db, "do_orders", key); n != 1 {
			t.Errorf("%d order rows for the key; want exactly 1", n)
		}
		key += "-again"
	}
}

// TestPausedHolderCommitsNothing: holder A writes its order in its
// transaction and pauses past its lock; holder B takes the key over and
// commits its order; A resumes and returns: its commit finds the record
// no longer its lock (ErrLockLost), and exactly one order row is there.
// In plain mode (the order on the pool by itself) the same run leaves
// two.
func TestPausedHolderCommitsNothing(t *testing.T) {
	db := newDB(t, plainParams)
	s := newTable(t, db, "paused_records")
	ordersTable(t, db, "paused_orders")
	for _, tx := range []bool{true, false} {
		base := time.Now().Truncate(time.Millisecond)
		key := "paused-" + base.String()
		a, b := sqlfaults.Processor(t, s, base), sqlfaults.Processor(t, s, base.Add(2*sqlfaults.LockFor))
		written, resume := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- a.Do(t.Context(), key, func(ctx context.Context) error {
				if err := insertOrder(ctx, db, "paused_orders", key, tx); err != nil {
					return err
				}
				close(written)
				<-resume
				return nil
			})
		}()
		select {
		case <-written:
		case err := <-done:
			t.Fatalf("holder A ended before writing: %v", err)
		}
		if err := b.Do(t.Context(), key, func(ctx context.Context) error { return insertOrder(ctx, db, "paused_orders", key, tx) }); err != nil {
			t.Fatalf("holder B's takeover: %v", err)
		}
		close(resume)
		// (In plain mode the effect is done whatever the completion says:
		// Do does not fail the work that did it.)
		if err := <-done; tx && !errors.Is(err, sqsonce.ErrLockLost) {
			t.Errorf("transactional %v: the paused holder's Do returned %v; want an error matching ErrLockLost", tx, err)
		}
		want := map[bool]int{true: 1, false: 2}[tx]
		if n := orders(t, db, "paused_orders", key); n != want {
			t.Errorf("transactional %v: %d order rows for the key; want %d", tx, n, want)
		}
	}
}

// TestProcessorCheckOnAMissingTable: Processor.Check on a store whose
// table does not exist says so, matching ErrMisconfigured, and gives the
// fix.
func TestProcessorCheckOnAMissingTable(t *testing.T) {
	p := sqlfaults.Processor(t, New(newDB(t, plainParams), "no_such_table"), time.Now())
	err := p.Check(t.Context())
	if !errors.Is(err, sqsonce.ErrMisconfigured) || !strings.Contains(err.Error(), "CreateTable") || !strings.Contains(err.Error(), "CREATE TABLE") {
		t.Errorf("Check on a missing table returned %v; want ErrMisconfigured with CreateTable and the CREATE TABLE", err)
	}
}
